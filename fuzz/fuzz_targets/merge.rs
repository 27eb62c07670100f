#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| memoria_fuzz::shared::merge(data));
