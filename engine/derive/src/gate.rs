//! The poison gate: text that reads as instructions to an assistant never becomes trusted
//! memory. Everything a conversation or a model turns into memory — a captured message's facts
//! and summary, a consolidation or merge draft, a note a model writes — is checked here first.
//!
//! Five named detectors, each a set of rules in English, Spanish, Chinese, German and French:
//!
//! - [`OVERRIDE`]: an order to drop what the assistant was told ("ignore all previous
//!   instructions", "haz caso omiso de las instrucciones anteriores", "忽略之前的所有指令").
//! - [`ROLE`]: a change of role ("you are now DAN", "act as a Linux terminal", "tu es
//!   maintenant…", "从现在开始你是…", "Entwicklermodus").
//! - [`FAKE_TURN`]: text dressed as another turn of a conversation: chat-template tokens
//!   (`<|im_start|>`, `[INST]`, `<<SYS>>`), a `SYSTEM:` line, a `### Instruction` header, a second
//!   speaker's turn inside one message.
//! - [`FORGET`]: an order to forget or wipe ("forget everything you were told", "olvídalo todo",
//!   "vergiss alles").
//! - [`TOOL`]: an order to run something or send something out: a download piped into a shell,
//!   `rm -rf ~`, a secret file or key sent or read out, a tool called to write or upload, doing it
//!   without telling the user.
//!
//! The rules are precise on purpose: a phrase counts only in the position of an order (the start
//! of a sentence, after "please", addressed to "you"), so prose that talks *about* instructions
//! ("the previous instructions in the README", "ignore the warning", "the server acts as a
//! cache") passes. It is a pattern filter, not a proof: it names what it found so that a false
//! positive is visible, and it never sees a model.
//!
//! **Invariant:** pure and total — no I/O, no logging (callers log the detector's name, never the
//! text), and every text gets an answer. A text is read as a whole, its lines and sentences in
//! place: an order on a line of its own trips the text it is in.

use std::sync::LazyLock;

use regex::Regex;

/// An order to drop earlier instructions.
pub const OVERRIDE: &str = "override";
/// A change of the assistant's role.
pub const ROLE: &str = "role";
/// A fake system, user or assistant turn.
pub const FAKE_TURN: &str = "fake_turn";
/// An order to forget.
pub const FORGET: &str = "forget";
/// An order to run a tool or command, or to send data out.
pub const TOOL: &str = "tool";

/// Every detector, in the order they are tried.
pub const DETECTORS: [&str; 5] = [OVERRIDE, ROLE, FAKE_TURN, FORGET, TOOL];

/// What a hit means for text that would become memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// An attempt to take the assistant over (override, role change, fake turn): never written
    /// anywhere it could be recalled.
    Refuse,
    /// An order (forget, run a tool): kept where it is, marked quarantined.
    Quarantine,
}

/// A detector that matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Detection {
    /// One of [`DETECTORS`].
    pub detector: &'static str,
    pub severity: Severity,
    /// Where in the text checked the match starts, in bytes.
    pub at: usize,
}

/// The severity of a detector's hits.
pub fn severity(detector: &str) -> Severity {
    match detector {
        FORGET | TOOL => Severity::Quarantine,
        _ => Severity::Refuse,
    }
}

/// The first detector `text` trips, if any.
pub fn check(text: &str) -> Option<Detection> {
    RULES.iter().find_map(|d| {
        d.first(text).map(|at| Detection {
            detector: d.name,
            severity: severity(d.name),
            at,
        })
    })
}

/// Whether `text` passes every detector.
pub fn clean(text: &str) -> bool {
    check(text).is_none()
}

/// One detector: patterns that match anywhere, and groups of patterns that must all match
/// within one sentence.
struct Detector {
    name: &'static str,
    anywhere: Vec<Regex>,
    together: Vec<Vec<Regex>>,
}

impl Detector {
    fn first(&self, text: &str) -> Option<usize> {
        let mut found = self
            .anywhere
            .iter()
            .filter_map(|r| r.find(text).map(|m| m.start()))
            .min();
        if !self.together.is_empty() {
            for (start, sentence) in sentences(text) {
                if self
                    .together
                    .iter()
                    .any(|group| group.iter().all(|r| r.is_match(sentence)))
                {
                    found = Some(found.map_or(start, |f| f.min(start)));
                    break;
                }
            }
        }
        found
    }
}

/// The sentences of a text with where each starts. A stop ends a sentence only before a space
/// or the end, so paths (`~/.ssh`) and addresses stay whole.
fn sentences(text: &str) -> Vec<(usize, &str)> {
    static END: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"[.!?;](?:\s|$)|[。！？；\n]").expect("a valid pattern"));
    let mut out = Vec::new();
    let mut start = 0;
    for m in END.find_iter(text) {
        out.push((start, &text[start..m.end()]));
        start = m.end();
    }
    if start < text.len() {
        out.push((start, &text[start..]));
    }
    out
}

/// Where an order starts: the start of the text or of a sentence or clause, or after a word that
/// leads an order ("please", "now", "and"). An apostrophe is not a start ("J'oublie tout").
const START: &str = r#"(?:^|[.!?;:,\n"“”«»(\[。！？；：，]\s*|\b(?:please|pls|now|and|also|then|ok|okay|so|but|por\s+favor|ahora|y|bitte|jetzt|und|dann|maintenant|et|alors|merci\s+de)[,\s]+)"#;

/// The same in Chinese, where nothing separates words.
const ZH_START: &str =
    r#"(?:^|[。！？；：，、,.!?;:\n“”"（(【\[]\s*|请|现在|立即|马上|立刻|然后|并且?|你要?)"#;

/// An article and up to three words before the noun that names a role.
const ART: &str = r"(?:(?:an?|the|my|our|un|una|el|la|mi|tu|ein|eine|einen|einer|eines|der|die|das|mein|meine|une|le|l'|mon|ma)\s+)?(?:[\w'’]+?[\s-]+){0,3}?";

const ROLE_EN: &str = r"(?:AI|A\.I\.|assistant|chat-?bot|bot|model|LLM|language\s+model|DAN|terminal|shell|console|interpreter|(?:system\s+)?administrator|sysadmin|admin|root|superuser|hacker|jailbroken|unfiltered|uncensored|unrestricted|evil\w*|persona|system)\b";
const ROLE_ES: &str = r"(?:IA|inteligencia\s+artificial|asistente|chatbot|bot|modelo|terminal|consola|shell|intérprete|administrador|admin|root|superusuario|hacker|DAN|sistema|sin\s+(?:restricciones|filtros|censura|límites|normas|reglas))\b";
const ROLE_ZH: &str = r"(?:AI|人工智能|助手|助理|机器人|模型|终端|控制台|管理员|超级用户|黑客|DAN|系统|没有(?:任何)?(?:限制|规则|约束|过滤)|不受(?:任何)?(?:限制|约束)|无限制)";
const ROLE_DE: &str = r"(?:KI|künstliche\s+Intelligenz|Assistent\w*|Chatbot|Bot|Modell|Sprachmodell|Terminal|Konsole|Shell|Interpreter|\w*[Aa]dministrator\w*|Admin|Root|Hacker|DAN|System\w*|ungefiltert\w*|unzensiert\w*|uneingeschränkt\w*|ohne\s+(?:jegliche\s+)?(?:Einschränkungen|Filter|Regeln|Zensur|Grenzen))\b";
const ROLE_FR: &str = r"(?:IA|intelligence\s+artificielle|assistant\w*|chatbot|bot|modèle|terminal|console|shell|interpréteur|administrateur|admin|root|superutilisateur|hacker|pirate|DAN|système|sans\s+(?:aucune?\s+)?(?:restrictions?|filtres?|censure|règles?|limites?))\b";

/// Secret files and dotfiles an order names.
const SECRET_PATH: &str = r#"(?:~/\.ssh|\bid_rsa\b|\bid_ed25519\b|\.aws/credentials|/etc/passwd|/etc/shadow|\.git-credentials|~/\.netrc|~/\.bashrc|~/\.zshrc|~/\.profile|(?:^|[\s`'"(])\.env\b)"#;
/// Verbs that read out, send or change a file.
const FILE_VERB: &str = r"(?:\b(?:send|upload|post|e-?mail|forward|exfiltrate|leak|copy|paste|print|show|reveal|dump|attach|include|read|cat|overwrite|envía|envia|manda|sube|subir|publica|copia|lee|muestra|incluye|revela|adjunta|reenvía|sobrescribe|sende|schicke|schick|kopiere|lies|zeige|verrate|überschreibe|envoie|envoyez|téléverse|publie|copie|lis|affiche|inclus|révèle|transfère|écrase)\b|发送|发到|发给|上传|读取|显示|附上|泄露|复制|打印|覆盖|写入)";
/// Verbs that send something out.
const SEND_VERB: &str = r"(?:\b(?:send|upload|post|e-?mail|forward|exfiltrate|leak|transmit|envía|envia|manda|sube|publica|reenvía|sende|schicke|schick|leite|envoie|envoyez|téléverse|publie|transfère)\b|发送|发到|发给|上传|hochladen|hochzuladen)";
/// Names of secrets.
const SECRET_NOUN: &str = r"(?:\b(?:api[\s-]?keys?|passwords?|credentials|secrets?|tokens?|private\s+keys?|ssh\s+keys?|claves?|contraseñas|credenciales|secretos|API-Schlüssel|Schlüssel|Passw(?:ö|oe)rter|Zugangsdaten|Geheimnisse|clés?|mots\s+de\s+passe|identifiants)\b|密钥|密码|凭据|令牌)";
/// Somewhere outside: a web address or a mail address.
const DESTINATION: &str = r"(?:https?://|\b[\w.+-]+@[\w-]+\.[\w.]+)";

fn compile(pattern: &str) -> Regex {
    let p = pattern
        .replace("{START}", START)
        .replace("{ZH_START}", ZH_START)
        .replace("{ART}", ART)
        .replace("{ROLE_EN}", ROLE_EN)
        .replace("{ROLE_ES}", ROLE_ES)
        .replace("{ROLE_ZH}", ROLE_ZH)
        .replace("{ROLE_DE}", ROLE_DE)
        .replace("{ROLE_FR}", ROLE_FR);
    Regex::new(&format!("(?i){p}")).unwrap_or_else(|e| panic!("gate rule {pattern}: {e}"))
}

fn detector(name: &'static str, anywhere: &[&str], together: &[&[&str]]) -> Detector {
    Detector {
        name,
        anywhere: anywhere.iter().map(|p| compile(p)).collect(),
        together: together
            .iter()
            .map(|g| g.iter().map(|p| compile(p)).collect())
            .collect(),
    }
}

static RULES: LazyLock<Vec<Detector>> = LazyLock::new(|| {
    vec![
        detector(
            OVERRIDE,
            &[
                // English: drop the previous/system instructions.
                r"\b(?:ignore|disregard|forget|override|bypass|discard|abandon)\s+(?:(?:all|any|each|every)\s+(?:of\s+)?)?(?:(?:the|your|these|those|this|its)\s+)?(?:previous|prior|preceding|above|earlier|former|original|initial|system|developer|safety|hidden|default)(?:\s+\w+)?\s+(?:instructions?|prompts?|directions?|directives?|rules?|guidelines?|commands?|orders?|context|constraints?|polic(?:y|ies)|programming|guardrails?|restrictions?|messages?)\b",
                r"\b(?:ignore|disregard|override|bypass|discard)\s+(?:(?:all|any|every)\s+(?:of\s+)?)?(?:(?:the|your|these|those)\s+)?(?:instructions?|prompts?|directions?|directives?|rules?|guidelines?|commands?|orders?|messages?)\s+(?:you(?:'ve|\s+have|\s+were|\s+had)?\s+(?:been\s+)?(?:given|received|got|told)|above|before|so\s+far|earlier|previously|up\s+to\s+now)",
                r"{START}(?:ignore|disregard)\s+(?:all\s+(?:of\s+)?)?your\s+(?:instructions|rules|guidelines|programming|system\s+prompt|prompt)\b",
                r"\b(?:ignore|disregard)\s+(?:all\s+(?:of\s+)?|everything\s+)?(?:the\s+)?(?:above|foregoing|text\s+above)\b",
                r"\b(?:do\s+not|don't|never|stop|no\s+longer)\s+(?:follow|obey|comply\s+with|adhere\s+to|listen\s+to|apply)(?:ing)?\s+(?:any\s+(?:of\s+)?)?(?:(?:your|its)\s+(?:\w+\s+)?|the\s+(?:previous|prior|original|earlier|initial|system|above|safety|developer)\s+)(?:instructions|guidelines|rules|prompt|directives|programming|policies|policy)\b",
                r"\b(?:new|these|following|updated)\s+(?:instructions|rules|directives)\s+(?:supersede|override|replace|take\s+precedence\s+over|cancel|void)\s+(?:all\s+|any\s+)?(?:(?:the|your)\s+)?(?:previous|prior|earlier|above|other|original|old|system)",
                // Spanish.
                r"\b(?:ignora|ignore|ignoren|ignorad|ignorar|olvida|olvide|olviden|olvidar|omite|omita|omitir|descarta|descarte|desobedece|desobedezca|haz\s+caso\s+omiso\s+(?:a|de)|haga\s+caso\s+omiso\s+(?:a|de)|hacer\s+caso\s+omiso\s+(?:a|de)|no\s+(?:sigas|siga|obedezcas|obedezca|hagas\s+caso\s+a|cumplas))\s+(?:tod[oa]s?\s+)?(?:(?:las|los|tus|sus|el|la|lo|tu|su)\s+)?(?:(?:instrucciones|instrucción|indicaciones|reglas|órdenes|directrices|normas|mensajes|consignas|prompt|restricciones)\s+)?(?:anteriores|anterior|previas?|previos?|originales|iniciales|de\s+arriba|precedentes|del\s+sistema|de\s+sistema|que\s+te\s+(?:dieron|di|han\s+dado|dimos)|que\s+recibiste)\b",
                r"(?:\bnuevas\s+(?:instrucciones|reglas|órdenes)|\b(?:instrucciones|reglas|órdenes)\s+nuevas)\s+(?:\w+\s+)?(?:sustituyen|reemplazan|anulan|invalidan|tienen\s+prioridad)\b",
                // Chinese.
                r"{ZH_START}(?:忽略|无视|忽视|不要理会|不用理会|别理会|不要管|别管|跳过|不要遵守|不要再遵守|别再遵守|不再遵守|停止遵守)(?:掉)?[^，。！？；,.!?;\n了]{0,8}?(?:之前|以前|先前|此前|上面|上述|以上|前面|原来|原先|原有|原始|最初|所有|全部|一切|系统)[^，。！？；,.!?;\n]{0,10}?(?:指令|指示|提示词|提示|规则|命令|设定|约束|限制|要求)",
                r"(?:指令|指示|规则)[^，。！？\n]{0,4}(?:优先于|取代|覆盖|替代|替换)[^，。！？\n]{0,6}(?:之前|以前|先前|此前|上面|上述|以上|原来|所有)",
                // German.
                r"\b(?:ignorier(?:e|en|t)?|missacht(?:e|en|et)?|vergiss|vergessen\s+Sie|vergesst|übergeh(?:e|en)|überschreib(?:e|en)|verwirf|verwerfen\s+Sie)\s+(?:Sie\s+)?(?:(?:alle|sämtliche|jegliche)\s+)?(?:(?:deine|deinen|die|ihre|Ihre|Ihren|eure|der|den|diese|dein)\s+)?(?:vorherigen|vorigen|bisherigen|früheren|obigen|ursprünglichen|vorangegangenen|vorhergehenden|alten|ersten|gegebenen|oben\s+genannten)\s+(?:Anweisungen|Anweisung|Instruktionen|Befehle|Regeln|Vorgaben|Richtlinien|System-?prompts?|Prompts?|Nachrichten|Anordnungen|Einschränkungen)\b",
                r"\b(?:ignorier(?:e|en)|missacht(?:e|en)|vergiss|übergeh(?:e|en))\s+(?:Sie\s+)?(?:deinen|deine|den|die|Ihren|Ihre)\s+(?:System-?prompt|System-?anweisungen|Sicherheitsregeln|Inhaltsrichtlinien|Richtlinien)\b",
                r"\b(?:befolge|befolgen\s+Sie|folge|gehorche)\s+(?:\w+\s+){0,3}?(?:Anweisungen|Regeln|Richtlinien|Vorgaben)\s+nicht\s+mehr\b",
                r"\b(?:neue|diese)\s+(?:Anweisungen|Regeln)\s+(?:ersetzen|überschreiben|haben\s+Vorrang\s+vor|heben)\s+(?:alle\s+)?(?:vorherigen|bisherigen|früheren|alten)",
                // French.
                r"\b(?:ignore[rsz]?|ignorez|oublie[rsz]?|oubliez|néglige[rsz]?|négligez|fais\s+abstraction\s+des?|faites\s+abstraction\s+des?|ne\s+(?:tiens|tenez)\s+(?:pas|plus)\s+compte\s+des?|ne\s+(?:suis|suivez|respecte|respectez|obéis|obéissez)\s+plus(?:\s+(?:à|aux))?)\s+(?:(?:toutes|tous|toute|tout)\s+)?(?:(?:les|tes|vos|ses|la|le|l'|l’)\s*)?(?:(?:instructions?|consignes?|directives?|règles|ordres|commandes|indications|prompts?|restrictions)\s+)?(?:précédentes?|précédents|antérieures?|antérieurs|ci-dessus|initiales?|originales?|d'origine|du\s+système|système|passées|plus\s+haut|données\s+auparavant)",
                r"(?:\bnouvelles?\s+(?:instructions|consignes|règles)|\b(?:instructions|consignes|règles)\s+nouvelles)\s+(?:\w+\s+)?(?:remplacent|annulent|priment\s+sur|l'emportent\s+sur)\b",
            ],
            &[],
        ),
        detector(
            ROLE,
            &[
                // English.
                r"\b(?:you\s+are|you're|you\s+will\s+be|you'll\s+be)\s+now\s+{ART}{ROLE_EN}",
                r"\b(?:from\s+now\s+on|from\s+this\s+(?:moment|point)(?:\s+on)?|henceforth|starting\s+now|for\s+the\s+rest\s+of\s+(?:this|the)\s+(?:conversation|chat|session))[,\s]+(?:you\s+(?:are|will\s+be|shall\s+be|will\s+act\s+as|will\s+behave\s+as|act\s+as|will\s+play|play|will\s+pretend\s+to\s+be)|you're|act\s+as|behave\s+as)\s+{ART}{ROLE_EN}",
                r"{START}(?:act|behave|pose|function)\s+(?:as|like)\s+{ART}{ROLE_EN}",
                r"\byou\s+(?:will|must|should|shall)\s+(?:now\s+)?(?:act|behave)\s+(?:as|like)\s+{ART}{ROLE_EN}",
                r"{START}(?:role-?\s?play|play\s+the\s+(?:role|part)\s+of|impersonate|simulate|emulate)\s+(?:as\s+)?{ART}{ROLE_EN}",
                r"{START}pretend\s+(?:that\s+)?(?:you\s+are|you're|to\s+be)\b",
                r"\byou(?:\s+are|'re)\s+no\s+longer\s+(?:an?\s+|the\s+)?(?:AI|assistant|Claude|ChatGPT|GPT|Gemini|Copilot|Llama|bound|restricted|limited|required|language\s+model|subject)\b",
                r"\byou(?:'re|\s+are)\s+not\s+(?:Claude|ChatGPT|GPT|Gemini|an\s+AI|an\s+assistant)\s+any\s?more\b",
                r"\b(?:enable|activate|enter|switch\s+(?:in)?to|turn\s+on|unlock)\s+(?:the\s+)?(?:developer|dev|DAN|jailbreak|god|unrestricted|unfiltered|sudo|evil)\s+mode\b[^.!?\n]{0,80}?(?:polic|restrict|filter|guideline|rule|censor|refus|limit|safety)",
                r"\b(?:DAN|jailbreak)\s+mode\b",
                // Spanish.
                r"\b(?:a\s+partir\s+de\s+ahora|desde\s+ahora|de\s+ahora\s+en\s+adelante|desde\s+este\s+momento|ahora|ya)[,\s]+(?:tú\s+)?(?:eres|serás|vas\s+a\s+ser|actuarás\s+como|te\s+comportarás\s+como|actúas\s+como|vas\s+a\s+actuar\s+como|interpretarás)\s+{ART}{ROLE_ES}",
                r"{START}(?:actúa|actúe|actuad|compórtate|compórtese|haz\s+(?:el\s+papel\s+)?de|haga\s+de|interpreta\s+(?:el\s+papel\s+de\s+)?|juega\s+a\s+ser|simula\s+ser)\s+(?:como\s+)?{ART}{ROLE_ES}",
                r"{START}(?:finge|finja|fingid|haz\s+como\s+si|haga\s+como\s+si)\s+(?:que\s+)?(?:eres|es|ser|fueras|fuera)\b",
                r"\bya\s+no\s+eres\s+(?:un\s+|una\s+|el\s+|la\s+)?(?:asistente|IA|Claude|ChatGPT|GPT|Gemini|modelo)\b",
                r"\b(?:activa|active|entra\s+en|entre\s+en|cambia\s+a|pasa\s+a)\s+(?:el\s+)?modo\s+(?:desarrollador|DAN|jailbreak|dios|sin\s+restricciones|sin\s+filtros)[^.!?\n]{0,80}?(?:polític|restric|filtr|norma|regla|censur|límite|segur)",
                // Chinese.
                r"(?:你现在(?:就)?是|现在你(?:就)?是|从现在(?:开始|起)[，,]?\s*你(?:就|将)?(?:是|充当|扮演|作为)|从此(?:刻)?(?:起|开始)[，,]?\s*你(?:就|将)?(?:是|充当|扮演|作为)|你将(?:充当|扮演))[^，。！？；\n]{0,14}?{ROLE_ZH}",
                r"{ZH_START}(?:扮演|充当|模拟)(?:一个|一名|一位)?[^，。！？；\n]{0,10}?{ROLE_ZH}",
                r"{ZH_START}假装(?:你|自己)(?:是|为)",
                r"你不再是(?:Claude|ChatGPT|GPT|Gemini|一个?AI|一个?助手|人工智能)",
                r"(?:进入|开启|启用|打开|切换到)(?:开发者|DAN|越狱|上帝|无限制|无审查)模式[^。！？\n]{0,30}?(?:政策|限制|规则|过滤|审查|安全|拒绝)",
                r"以(?:一个|一名)?[^，。！？；\n]{0,12}?{ROLE_ZH}的身份(?:回答|回复|说话|行事|发言)",
                // German.
                r"\bdu\s+bist\s+(?:jetzt|nun|ab\s+jetzt|ab\s+sofort|von\s+nun\s+an|ab\s+heute)\s+{ART}{ROLE_DE}",
                r"\b(?:ab\s+jetzt|ab\s+sofort|von\s+nun\s+an|von\s+jetzt\s+an|ab\s+diesem\s+Moment)[,\s]+(?:bist\s+du|agierst\s+du\s+als|verhältst\s+du\s+dich\s+wie|handelst\s+du\s+als|spielst\s+du|sind\s+Sie|agieren\s+Sie\s+als)\s+{ART}{ROLE_DE}",
                r"{START}(?:verhalte\s+dich|verhalten\s+Sie\s+sich|agiere|agieren\s+Sie|handle|spiele|spielen\s+Sie|simuliere)\s+(?:wie|als|die\s+Rolle)\s+(?:(?:eines|einer|des|der)\s+)?{ART}{ROLE_DE}",
                r"{START}(?:tu|tun\s+Sie)\s+so,?\s+als\s+(?:ob\s+)?(?:wärst|wären|bist|du|Sie)\b",
                r"\bdu\s+bist\s+nicht\s+mehr\s+(?:ein\s+|eine\s+)?(?:Claude|ChatGPT|GPT|Gemini|Assistent|KI|Sprachmodell)\b",
                r"\b(?:aktiviere|aktivieren\s+Sie|wechsle\s+in|starte|schalte)\s+(?:den\s+)?(?:Entwickler|DAN-?|Jailbreak-?|Gott|God-?)modus[^.!?\n]{0,80}?(?:Richtlinie|Einschränkung|Filter|Regel|Zensur|Grenze|Sicherheit)",
                // French.
                r"\b(?:tu\s+es|vous\s+êtes|tu\s+seras|vous\s+serez)\s+(?:maintenant|désormais|à\s+présent|dorénavant)\s+{ART}{ROLE_FR}",
                r"\b(?:à\s+partir\s+de\s+maintenant|désormais|dorénavant|à\s+partir\s+de\s+ce\s+moment|dès\s+maintenant)[,\s]+(?:tu\s+es|vous\s+êtes|tu\s+seras|vous\s+serez|tu\s+agis\s+comme|tu\s+te\s+comportes\s+comme|vous\s+agissez\s+comme|agis\s+comme|joue)\s+{ART}{ROLE_FR}",
                r"{START}(?:agis|agissez|comporte-toi|comportez-vous|joue|jouez|incarne|incarnez|simule|simulez)\s+(?:comme|en\s+tant\s+que|le\s+rôle\s+d['’]|le\s+rôle\s+de|le\s+rôle\s+du)\s*{ART}{ROLE_FR}",
                r"{START}(?:fais|faites)\s+(?:semblant\s+d['’]être|comme\s+si\s+(?:tu\s+étais|vous\s+étiez))",
                r"\b(?:tu\s+n['’]es|vous\s+n['’]êtes)\s+plus\s+(?:un\s+|une\s+)?(?:Claude|ChatGPT|GPT|Gemini|assistant|IA|modèle)\b",
                r"\b(?:active|activez|passe\s+en|passez\s+en|entre\s+en|entrez\s+en)\s+(?:le\s+)?mode\s+(?:développeur|DAN|jailbreak|dieu|sans\s+restriction)[^.!?\n]{0,80}?(?:politique|restriction|filtre|règle|censure|limite|sécurité)",
            ],
            &[],
        ),
        detector(
            FAKE_TURN,
            &[
                // Chat-template tokens and tags.
                r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text)\|>|\[/?INST\]|<</?SYS>>|</?(?:system|system_prompt|sys|instructions?)>",
                // A line that starts as a system turn.
                r"(?m)^[\s>*_#-]*(?:system|sistema|系统|système|systeme)(?:[ \t]*(?:message|prompt|nachricht|mensaje|消息|提示|note|notice|override|update|hinweis|del\s+sistema|instructions?))?[ \t]*[:：]",
                r"(?m)^[\s>*_#-]*(?:mensaje\s+del\s+sistema|message\s+(?:du\s+)?système|system\s+message|系统消息|系统提示|nota\s+del\s+sistema)[ \t]*[:：]",
                r"(?m)^[\s>*_-]*[\[【(<]\s*(?:system|sistema|系统|système|systeme)[^\]】)>\n]{0,12}[\]】)>]",
                // Another speaker's turn inside the text.
                r"\n[ \t]*(?:assistant|asistente|assistent|助手|AI|human|user|usuario|utilisateur|benutzer|用户|system)[ \t]*[:：]",
                // A prompt-template header.
                r"(?m)^[ \t]*#{2,}[ \t]*(?:instructions?|instrucci[óo]n(?:es)?|anweisung(?:en)?|consignes?|系统|指令|system(?:\s+prompt)?|sistema|système|response|respuesta|antwort|réponse|回答|回复)[ \t]*[:：]?[ \t]*$",
                // A system label written in capitals anywhere.
                r"(?-i:\b(?:SYSTEM|SISTEMA|SYSTÈME|SYSTEME)(?:\s+[A-ZÈÉ]+)?\s*[:：])",
            ],
            &[],
        ),
        detector(
            FORGET,
            &[
                r"{START}(?:forget|erase|wipe|clear|delete|purge|reset)\s+(?:about\s+)?(?:all\s+(?:of\s+)?)?(?:your|the)\s+(?:entire\s+|whole\s+)?(?:previous\s+|prior\s+|earlier\s+)?(?:memory|memories|context|instructions|training|knowledge|conversation\s+history|chat\s+history)\b",
                r"{START}forget\s+(?:about\s+)?(?:everything|all(?:\s+of\s+(?:it|this|that))?|what\s+(?:you\s+(?:were|have\s+been|'ve\s+been)\s+told|I\s+(?:said|told\s+you)))(?:\s+(?:you\s+(?:were|have\s+been|'ve\s+been)\s+told|you\s+know|above|before|so\s+far|prior|previous|earlier|I\s+(?:said|told\s+you)|and\s+(?:start|begin|reset))|\s*[.!]|(?m:[ \t]*$))",
                r"{START}forget\s+all\s+(?:prior|previous|earlier)\s+\w+",
                r"{START}(?:olvida|olvide|olvidad|olvídate\s+de|olvídese\s+de)\s+(?:todo(?:\s+lo\s+(?:anterior|que))?|tod[oa]s\s+(?:tus|sus|las)\s+(?:instrucciones|recuerdos|memorias|reglas)|(?:tus|sus)\s+(?:instrucciones|recuerdos|memorias|reglas)|lo\s+que\s+te\s+(?:dijeron|han\s+dicho|dije))",
                r"{START}olvídalo\s+todo",
                r"{START}(?:borra|borre|elimina|elimine|limpia|limpie|resetea|vacía)\s+(?:toda\s+|todos\s+)?(?:tu|tus|su|sus)\s+(?:memoria|recuerdos|contexto|memorias)\b",
                r"{ZH_START}(?:忘记|忘掉|忘了|清空|清除|删除|抹去|抹掉)[^，。！？；\n]{0,16}?(?:一切|所有|全部)",
                r"{ZH_START}(?:清空|清除|删除|抹去|重置)(?:你的)?(?:所有)?(?:记忆|上下文)",
                r"把[^，。！？；\n]{0,12}?(?:全部|统统|通通)(?:忘掉|忘记)",
                r"{START}(?:vergiss|vergessen\s+Sie|vergesst)(?:\s+(?:jetzt|bitte|nun))?(?:\s+alles|\s+alle\s+(?:(?:deine|Ihre|eure)\s+)?(?:(?:bisherigen|vorherigen)\s+)?(?:Anweisungen|Erinnerungen|Regeln)|\s+(?:deine|Ihre)\s+(?:(?:bisherigen|vorherigen)\s+)?(?:Anweisungen|Erinnerungen|Regeln)|,?\s+was\s+(?:man\s+)?(?:dir|Ihnen)\s+(?:vorher\s+|zuvor\s+|bisher\s+)?gesagt)",
                r"{START}(?:lösche|löschen\s+Sie|leere|leeren\s+Sie|setze)\s+(?:alle\s+)?(?:dein(?:e|en)?|Ihr(?:e|en)?)\s+(?:Gedächtnis|Erinnerungen|Speicher|Kontext)\b",
                r"{START}(?:oublie|oubliez)\s+(?:tout|toutes?\s+(?:tes|vos|les)\s+(?:instructions|consignes|souvenirs|règles)|(?:tes|vos)\s+(?:instructions|consignes|souvenirs|règles)|ce\s+qu['’]on\s+(?:t['’]a|vous\s+a)\s+dit)\b",
                r"{START}(?:efface|effacez|supprime|supprimez|vide|videz|réinitialise)\s+(?:tous\s+|toute\s+)?(?:ta|votre|tes|vos)\s+(?:mémoire|souvenirs|contexte)\b",
            ],
            &[],
        ),
        detector(
            TOOL,
            &[
                // A download piped into a shell; wiping a home or a disk.
                r"\b(?:curl|wget|iwr|Invoke-WebRequest|irm)\b[^\n|]{0,200}\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b",
                r"\|\s*(?:iex|Invoke-Expression)\b",
                r"\brm\s+-[a-zA-Z]*[rR][a-zA-Z]*\s+(?:-\S+\s+)*(?:~/?(?:\s|$)|/(?:\s|$|\*)|\$HOME/?(?:\s|$)|\*)",
                r"\bmkfs\.\w+\s+/dev/|\bdd\s+if=\S+\s+of=/dev/",
                // Download and run.
                r"\b(?:download|fetch|get|grab|pull)\s+\S*?https?://\S+\s+(?:and\s+)?(?:then\s+)?(?:run|execute|exec|install|open|source)\b",
                r"\b(?:descarga|descargue|baja|obtén)\s+https?://\S+\s+y\s+(?:luego\s+)?(?:ejecútalo|ejecuta|ejecútala|instálalo|ábrelo)",
                r"下载\s*https?://\S+\s*(?:并|然后|后)?(?:立即|立刻|马上)?(?:执行|运行|安装)",
                r"\b(?:lade|laden\s+Sie)\s+https?://\S+\s+herunter\s+und\s+(?:führe|starte|installiere)",
                r"\b(?:télécharge|téléchargez|récupère)\s+https?://\S+\s+et\s+(?:exécute|lance|installe)",
                // A tool called to write, delete or send.
                r"{START}(?:call|invoke|use|run|trigger|execute)\s+(?:the\s+)?[\w`.-]*\s*(?:tool|function)\b[^.!?\n]{0,100}?(?:overwrite|delete|remove|upload|send|post|e-?mail|exfiltrate|contents?\s+of|~/|/etc/|https?://|rm\s+-)",
                r"{START}(?:llama\s+a|invoca|usa|utiliza|ejecuta)\s+(?:la\s+)?(?:herramienta|función)\b[^.!?\n]{0,100}?(?:sobrescrib|borra|elimina|sube|subir|envía|manda|publica|contenido\s+de|~/|/etc/|https?://)",
                r"(?:调用|使用|运行|执行)[^，。！？\n]{0,20}?(?:工具|函数)[^。！？\n]{0,40}?(?:覆盖|删除|上传|发送|发到|附上|内容|~/|/etc/|https?://)",
                r"{START}(?:rufe|rufen\s+Sie|benutze|benutzen\s+Sie|verwende|nutze|führe)\s+(?:das|die|den)\s+[\w-]*(?:Tool|Werkzeug|Funktion)\b[^.!?\n]{0,100}?(?:überschreib|lösch|hochzuladen|hochladen|sende|schick|Inhalt\s+von|~/|/etc/|https?://)",
                r"{START}(?:appelle|appelez|invoque|invoquez|utilise|utilisez|exécute)\s+(?:l['’]outil|la\s+fonction)\b[^.!?\n]{0,100}?(?:écrase|supprime|téléverse|envoie|publie|contenu\s+de|~/|/etc/|https?://)",
                // Doing it behind the user's back.
                r"\bwithout\s+(?:telling|asking|informing|notifying|alerting|letting)\s+(?:the\s+)?user\b|\b(?:do\s+not|don't|never)\s+(?:tell|inform|notify|alert)\s+the\s+user\b",
                r"\bsin\s+(?:decírselo|decirle|decirlo|avisar|informar|preguntar)(?:le|lo)?\s+al\s+usuario\b",
                r"不(?:要)?(?:告诉|通知|提醒|告知)用户",
                r"\bohne\s+(?:es\s+)?(?:dem|den)\s+Benutzer\s+(?:zu\s+)?(?:sagen|informieren|fragen|benachrichtigen)",
                r"\bsans\s+(?:le\s+dire|prévenir|en\s+informer|informer|demander)\s+(?:à\s+)?l['’]utilisateur",
            ],
            &[
                // A secret file read out, sent or overwritten.
                &[FILE_VERB, SECRET_PATH],
                // Secrets sent somewhere outside.
                &[SEND_VERB, SECRET_NOUN, DESTINATION],
            ],
        ),
    ]
});

#[cfg(test)]
mod tests;
