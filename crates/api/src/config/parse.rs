//! Reading a file: TOML parsed with recovery, every section deserialized on its own, then the
//! semantic checks, each problem placed at its line and column.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::check::Item;
use super::{Config, DaemonSection};

/// One problem of a configuration, where it is when the configuration came from text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line and column.
    pub at: Option<(usize, usize)>,
    pub message: String,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// Every problem found, in the order they appear.
    #[error("{}", show_problems(origin, problems))]
    Invalid {
        origin: String,
        problems: Vec<Problem>,
    },
}

impl ConfigError {
    /// The problems, or none for a file that could not be read.
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Invalid { problems, .. } => problems,
            ConfigError::Read { .. } => &[],
        }
    }
}

fn show_problems(origin: &str, problems: &[Problem]) -> String {
    let mut s = format!(
        "{origin}: {} problem{}",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for p in problems {
        match p.at {
            Some((l, c)) => s.push_str(&format!("\n  {origin}:{l}:{c}: {}", p.message)),
            None => s.push_str(&format!("\n  {origin}: {}", p.message)),
        }
    }
    s
}

/// Byte ranges of each item in the source text.
#[derive(Debug, Default)]
struct Spans {
    daemon: Option<Range<usize>>,
    network: Vec<Range<usize>>,
    interface: Vec<Range<usize>>,
    af_packet: Vec<Range<usize>>,
    af_xdp: Vec<Range<usize>>,
    route: Vec<Range<usize>>,
    neighbor: Vec<Range<usize>>,
    service: Vec<Range<usize>>,
    address_set: Vec<Range<usize>>,
    policy: Vec<Range<usize>>,
}

impl Spans {
    fn of(&self, item: Item) -> Option<Range<usize>> {
        match item {
            Item::Daemon => self.daemon.clone(),
            Item::Network(k) => self.network.get(k).cloned(),
            Item::Interface(k) => self.interface.get(k).cloned(),
            Item::AfPacket(k) => self.af_packet.get(k).cloned(),
            Item::AfXdp(k) => self.af_xdp.get(k).cloned(),
            Item::Route(k) => self.route.get(k).cloned(),
            Item::Neighbor(k) => self.neighbor.get(k).cloned(),
            Item::Service(k) => self.service.get(k).cloned(),
            Item::AddressSet(k) => self.address_set.get(k).cloned(),
            Item::Policy(k) => self.policy.get(k).cloned(),
        }
    }
}

/// 1-based line and column of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

impl Config {
    /// Parses and validates `text`; `origin` names it in messages (a path, "embedded default").
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let invalid = |problems| ConfigError::Invalid {
            origin: origin.to_string(),
            problems,
        };
        let at = |span: Option<Range<usize>>| span.map(|s| line_col(text, s.start));
        let (doc, syntax) = DeTable::parse_recoverable(text);
        if !syntax.is_empty() {
            return Err(invalid(
                syntax
                    .iter()
                    .map(|e| Problem {
                        at: at(e.span()),
                        message: e.message().to_string(),
                    })
                    .collect(),
            ));
        }
        let mut cfg = Config::default();
        let mut spans = Spans::default();
        let mut problems: Vec<(Option<Range<usize>>, String)> = Vec::new();
        for (key, value) in doc.into_inner() {
            let span = value.span();
            match key.get_ref().as_ref() {
                "daemon" => {
                    spans.daemon = Some(span);
                    match typed::<DaemonSection>(value) {
                        Ok(d) => cfg.daemon = d,
                        Err(e) => problems.push((e.span(), format!("[daemon]: {}", e.message()))),
                    }
                }
                "interface" => section(
                    value,
                    "interface",
                    &mut cfg.interface,
                    &mut spans.interface,
                    &mut problems,
                ),
                "route" => section(
                    value,
                    "route",
                    &mut cfg.route,
                    &mut spans.route,
                    &mut problems,
                ),
                "neighbor" => section(
                    value,
                    "neighbor",
                    &mut cfg.neighbor,
                    &mut spans.neighbor,
                    &mut problems,
                ),
                "network" => section(
                    value,
                    "network",
                    &mut cfg.network,
                    &mut spans.network,
                    &mut problems,
                ),
                "af-packet" => section(
                    value,
                    "af-packet",
                    &mut cfg.af_packet,
                    &mut spans.af_packet,
                    &mut problems,
                ),
                "af-xdp" => section(
                    value,
                    "af-xdp",
                    &mut cfg.af_xdp,
                    &mut spans.af_xdp,
                    &mut problems,
                ),
                "service" => section(
                    value,
                    "service",
                    &mut cfg.service,
                    &mut spans.service,
                    &mut problems,
                ),
                "address-set" => section(
                    value,
                    "address-set",
                    &mut cfg.address_set,
                    &mut spans.address_set,
                    &mut problems,
                ),
                "policy" => section(
                    value,
                    "policy",
                    &mut cfg.policy,
                    &mut spans.policy,
                    &mut problems,
                ),
                other => problems.push((
                    Some(key.span()),
                    format!(
                        "unknown section {other:?}: expected [daemon], [[network]], [[interface]], [[af-packet]], [[af-xdp]], [[route]], [[neighbor]], [[service]], [[address-set]] or [[policy]]"
                    ),
                )),
            }
        }
        // Items that did not deserialize are missing from `cfg`; checking what is left
        // would report references to them as a second, misleading problem.
        if problems.is_empty() {
            for (item, message) in cfg.semantic_problems() {
                problems.push((spans.of(item), message));
            }
        }
        if problems.is_empty() {
            return Ok(cfg);
        }
        problems.sort_by_key(|(s, _)| s.as_ref().map_or(0, |s| s.start));
        Err(invalid(
            problems
                .into_iter()
                .map(|(s, message)| Problem { at: at(s), message })
                .collect(),
        ))
    }
}

/// Every table of array `[[name]]` deserialized on its own into `out`, its span into `spans`;
/// the tables that do not deserialize become problems.
fn section<T: serde::de::DeserializeOwned>(
    value: Spanned<DeValue<'_>>,
    name: &str,
    out: &mut Vec<T>,
    spans: &mut Vec<Range<usize>>,
    problems: &mut Vec<(Option<Range<usize>>, String)>,
) {
    for (v, s) in items(value, name, problems) {
        match typed::<T>(v) {
            Ok(x) => {
                out.push(x);
                spans.push(s);
            }
            Err(e) => problems.push((e.span(), format!("[[{name}]]: {}", e.message()))),
        }
    }
}

/// Deserializes one table of the document on its own, so a bad one does not hide the next.
fn typed<T: serde::de::DeserializeOwned>(v: Spanned<DeValue<'_>>) -> Result<T, toml::de::Error> {
    T::deserialize(serde::de::IntoDeserializer::into_deserializer(v))
}

/// The tables of an array of tables (`[[name]]`), each with its span.
fn items<'i>(
    v: Spanned<DeValue<'i>>,
    name: &str,
    problems: &mut Vec<(Option<Range<usize>>, String)>,
) -> Vec<(Spanned<DeValue<'i>>, Range<usize>)> {
    let span = v.span();
    match v.into_inner() {
        DeValue::Array(a) => a.iter().map(|x| (x.clone(), x.span())).collect(),
        _ => {
            problems.push((
                Some(span),
                format!("{name} must be an array of tables: write each as [[{name}]]"),
            ));
            Vec::new()
        }
    }
}
