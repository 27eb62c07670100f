//! How a count is said to a person.

/// A count with its noun for people to read: "1 note", "3 notes", "0 notes".
pub fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counted_uses_the_singular_for_one_only() {
        assert_eq!(super::counted(0, "note"), "0 notes");
        assert_eq!(super::counted(1, "note"), "1 note");
        assert_eq!(super::counted(2, "session"), "2 sessions");
    }
}
