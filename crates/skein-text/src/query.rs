//! The query language: lexer, parser and the parsed tree. The grammar, from
//! loosest to tightest binding:
//!
//! ```text
//! or      := and ("OR" and)*
//! and     := unary (["AND"] unary)*          juxtaposition is AND
//! unary   := ("NOT" | "-") unary | primary
//! primary := "(" or ")" | FIELD ":" primary | WORD | WORD "*" | "\"" PHRASE "\""
//! ```
//!
//! Every term is read with the index's own tokenizer, so a query term means
//! exactly what the same text in a record means.

use std::fmt;

use crate::field::{Field, FieldSet};
use crate::tokenize::{PieceKind, Token, tokenize};

/// A syntax error, at a byte offset of the query text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at position {position}: {message}")]
pub struct QueryError {
    /// Byte offset in the query where the problem is.
    pub position: usize,
    pub message: String,
}

fn err<T>(position: usize, message: impl Into<String>) -> Result<T, QueryError> {
    Err(QueryError {
        position,
        message: message.into(),
    })
}

/// A parsed query: evaluate it on a record with [`Query::matches`], ask an
/// index for candidate rows, highlight a hit with [`Query::highlights`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub(crate) root: Node,
    text: String,
}

/// One query term as the tokenizer reads it: the whole token and, for an
/// identifier that splits, its words in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueryToken {
    pub text: String,
    pub words: Vec<String>,
}

impl QueryToken {
    fn from_token(t: Token) -> QueryToken {
        let words = t
            .pieces
            .into_iter()
            .filter(|p| p.kind == PieceKind::Word)
            .map(|p| p.text)
            .collect();
        QueryToken { text: t.text, words }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// One token (a word, or a quoted single token).
    Term {
        fields: FieldSet,
        token: QueryToken,
    },
    /// Two or more consecutive tokens: a quoted phrase, or a word that
    /// tokenizes into several (`error=timeout`, a CJK word of 3+ characters).
    Phrase {
        fields: FieldSet,
        tokens: Vec<QueryToken>,
    },
    /// Any term starting with this folded text.
    Prefix {
        fields: FieldSet,
        prefix: String,
    },
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
}

impl Query {
    /// Parses a query; see the crate docs for the syntax.
    pub fn parse(text: &str) -> Result<Query, QueryError> {
        parse(text)
    }

    /// The fields the query looks at: a caller re-checking candidates need
    /// load only these values.
    pub fn fields(&self) -> FieldSet {
        fn walk(node: &Node, acc: &mut u8) {
            match node {
                Node::Term { fields, .. } | Node::Phrase { fields, .. } | Node::Prefix { fields, .. } => {
                    *acc |= fields.bits()
                }
                Node::And(nodes) | Node::Or(nodes) => nodes.iter().for_each(|n| walk(n, acc)),
                Node::Not(n) => walk(n, acc),
            }
        }
        let mut acc = 0;
        walk(&self.root, &mut acc);
        FieldSet::from_bits(acc)
    }

    /// The text the query was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses a query: words, `"phrases"`, `prefix*`, `AND` / `OR` / `NOT` (and
/// `-word`), parentheses, `field:` restrictions.
pub fn parse(text: &str) -> Result<Query, QueryError> {
    let mut lexemes = lex(text)?;
    // A word of punctuation alone (the `:` of `"level":"error"`, a lone
    // `-`) has nothing to search for, as in a record: it is dropped, and is
    // an error only if nothing else is left.
    let mut dropped = None;
    lexemes.retain(|l| match &l.kind {
        Kind::Word(w) if !w.ends_with('*') && tokenize(w).is_empty() => {
            dropped.get_or_insert((l.pos, w.clone()));
            false
        }
        _ => true,
    });
    if lexemes.is_empty() {
        return match dropped {
            Some((pos, word)) => err(pos, nothing_to_search(&word)),
            None => err(0, "empty query: give a word, a \"phrase\" or a prefix*"),
        };
    }
    let mut p = Parser {
        lexemes,
        at: 0,
        end: text.len(),
        depth: 0,
    };
    let parsed = p.or(FieldSet::ALL, false)?;
    if let Some(l) = p.peek() {
        return match l.kind {
            Kind::RParen => err(l.pos, "`)` without a matching `(`"),
            _ => err(l.pos, "unexpected text after the query"),
        };
    }
    if !parsed.positive {
        return err(
            parsed.pos,
            "the query needs a term to match: NOT only excludes, and each OR alternative needs a term of its own",
        );
    }
    Ok(Query {
        root: parsed.node,
        text: text.to_owned(),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    LParen,
    RParen,
    And,
    Or,
    Not,
    /// `body:` immediately followed by what it restricts.
    Field(Field),
    Word(String),
    Phrase(String),
}

#[derive(Debug, Clone)]
struct Lexeme {
    kind: Kind,
    pos: usize,
}

fn ends_word(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | ')' | '"')
}

fn lex(text: &str) -> Result<Vec<Lexeme>, QueryError> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(pos, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        match c {
            '(' | ')' => {
                chars.next();
                out.push(Lexeme {
                    kind: if c == '(' { Kind::LParen } else { Kind::RParen },
                    pos,
                });
            }
            '"' => {
                chars.next();
                let mut phrase = String::new();
                let mut closed = false;
                while let Some((_, c)) = chars.next() {
                    match c {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' => match chars.next() {
                            Some((_, e)) => phrase.push(e),
                            None => break,
                        },
                        _ => phrase.push(c),
                    }
                }
                if !closed {
                    return err(pos, "unclosed quote: the phrase that starts here has no closing `\"`");
                }
                out.push(Lexeme {
                    kind: Kind::Phrase(phrase),
                    pos,
                });
            }
            _ => {
                let mut end = text.len();
                while let Some(&(i, c)) = chars.peek() {
                    if ends_word(c) {
                        end = i;
                        break;
                    }
                    chars.next();
                }
                lex_word(text, pos, end, &mut out)?;
            }
        }
    }
    Ok(out)
}

/// A run of non-space text: a keyword, `-` (NOT) before a term, a `field:`
/// prefix before a term, or a word.
fn lex_word(text: &str, pos: usize, end: usize, out: &mut Vec<Lexeme>) -> Result<(), QueryError> {
    let word = &text[pos..end];
    let next = text[end..].chars().next();
    let kind = match word {
        "AND" => Some(Kind::And),
        "OR" => Some(Kind::Or),
        "NOT" => Some(Kind::Not),
        _ => None,
    };
    if let Some(kind) = kind {
        out.push(Lexeme { kind, pos });
        return Ok(());
    }
    // `-term`, `-"phrase"`, `-(group)`; `--flag` and a lone `-` are words.
    if let Some(rest) = word.strip_prefix('-') {
        let starts_term = match rest.chars().next() {
            Some(c) => c != '-',
            None => matches!(next, Some('(' | '"')),
        };
        if starts_term {
            out.push(Lexeme { kind: Kind::Not, pos });
            return if rest.is_empty() {
                Ok(())
            } else {
                lex_word(text, pos + 1, end, out)
            };
        }
    }
    // `name:term`, `name:"phrase"`, `name:(group)`. A trailing colon
    // (`ERROR:`) is punctuation, and `::` or `://` (`std::io`,
    // `http://host`) are part of a word.
    if let Some(colon) = word.find(':') {
        let name = &word[..colon];
        let rest = &word[colon + 1..];
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphabetic()) {
            let field = Field::from_name(name);
            let follows = if rest.is_empty() { next } else { rest.chars().next() };
            match follows {
                Some(':' | '/') => {}
                None | Some(')') if rest.is_empty() => {
                    if let Some(field) = field {
                        return err(pos, format!("`{field}:` needs a term right after the colon"));
                    }
                }
                Some(c) if rest.is_empty() && c.is_whitespace() => {
                    if let Some(field) = field {
                        return err(pos, format!("`{field}:` needs a term right after the colon"));
                    }
                }
                _ => {
                    let Some(field) = field else {
                        return err(
                            pos,
                            format!(
                                "unknown field `{name}` (fields: body, name, message, payload); to search for `{word}` itself, quote it: \"{word}\""
                            ),
                        );
                    };
                    out.push(Lexeme {
                        kind: Kind::Field(field),
                        pos,
                    });
                    let rest_pos = pos + colon + 1;
                    return if rest.is_empty() {
                        Ok(())
                    } else {
                        lex_word(text, rest_pos, end, out)
                    };
                }
            }
        }
    }
    out.push(Lexeme {
        kind: Kind::Word(word.to_owned()),
        pos,
    });
    Ok(())
}

/// A parsed sub-query, with whether it has a term to match (a positive
/// clause) and where to point if it does not.
struct Parsed {
    node: Node,
    positive: bool,
    pos: usize,
}

/// Deepest nesting of parentheses and NOTs: the parser and every evaluation
/// recurse, and query text comes from users (a stack overflow would abort
/// the process, not fail the request).
pub(crate) const MAX_DEPTH: usize = 64;

struct Parser {
    lexemes: Vec<Lexeme>,
    at: usize,
    end: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Lexeme> {
        self.lexemes.get(self.at)
    }

    fn next(&mut self) -> Option<Lexeme> {
        let l = self.lexemes.get(self.at).cloned();
        self.at += 1;
        l
    }

    fn enter(&mut self, pos: usize) -> Result<(), QueryError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err(pos, format!("nested more than {MAX_DEPTH} deep"));
        }
        Ok(())
    }

    fn here(&self) -> usize {
        self.peek().map_or(self.end, |l| l.pos)
    }

    fn or(&mut self, fields: FieldSet, restricted: bool) -> Result<Parsed, QueryError> {
        let first = self.and(fields, restricted)?;
        if !matches!(self.peek(), Some(Lexeme { kind: Kind::Or, .. })) {
            return Ok(first);
        }
        let pos = first.pos;
        let mut bad = (!first.positive).then_some(first.pos);
        let mut nodes = vec![first.node];
        while let Some(Lexeme {
            kind: Kind::Or,
            pos: or_pos,
        }) = self.peek().cloned()
        {
            self.next();
            if !self.starts_unary() {
                return err(or_pos, "OR needs a term after it");
            }
            let branch = self.and(fields, restricted)?;
            if !branch.positive {
                bad.get_or_insert(branch.pos);
            }
            nodes.push(branch.node);
        }
        Ok(Parsed {
            node: Node::Or(nodes),
            positive: bad.is_none(),
            pos: bad.unwrap_or(pos),
        })
    }

    fn starts_unary(&self) -> bool {
        matches!(
            self.peek(),
            Some(Lexeme {
                kind: Kind::LParen | Kind::Not | Kind::Field(_) | Kind::Word(_) | Kind::Phrase(_),
                ..
            })
        )
    }

    fn and(&mut self, fields: FieldSet, restricted: bool) -> Result<Parsed, QueryError> {
        if let Some(Lexeme {
            kind: Kind::And | Kind::Or,
            pos,
        }) = self.peek()
        {
            let kw = if matches!(self.peek(), Some(Lexeme { kind: Kind::And, .. })) {
                "AND"
            } else {
                "OR"
            };
            return err(*pos, format!("{kw} needs a term before it"));
        }
        let first = self.unary(fields, restricted)?;
        let pos = first.pos;
        let mut positive = first.positive;
        let mut nodes = vec![first.node];
        loop {
            match self.peek().cloned() {
                Some(Lexeme {
                    kind: Kind::And,
                    pos: and_pos,
                }) => {
                    self.next();
                    if !self.starts_unary() {
                        return err(and_pos, "AND needs a term after it");
                    }
                }
                _ if self.starts_unary() => {}
                _ => break,
            }
            let item = self.unary(fields, restricted)?;
            positive |= item.positive;
            nodes.push(item.node);
        }
        let node = if nodes.len() == 1 {
            nodes.pop().unwrap_or(Node::And(Vec::new()))
        } else {
            Node::And(nodes)
        };
        Ok(Parsed { node, positive, pos })
    }

    fn unary(&mut self, fields: FieldSet, restricted: bool) -> Result<Parsed, QueryError> {
        if let Some(Lexeme { kind: Kind::Not, pos }) = self.peek().cloned() {
            self.next();
            if !self.starts_unary() {
                return err(pos, "NOT needs a term after it");
            }
            self.enter(pos)?;
            let inner = self.unary(fields, restricted)?;
            self.depth -= 1;
            return Ok(Parsed {
                node: Node::Not(Box::new(inner.node)),
                positive: false,
                pos,
            });
        }
        self.primary(fields, restricted)
    }

    fn primary(&mut self, fields: FieldSet, restricted: bool) -> Result<Parsed, QueryError> {
        let here = self.here();
        let Some(l) = self.next() else {
            return err(here, "a term is missing here");
        };
        match l.kind {
            Kind::LParen => {
                if matches!(self.peek(), Some(Lexeme { kind: Kind::RParen, .. })) {
                    return err(l.pos, "empty parentheses");
                }
                if self.peek().is_none() {
                    return err(l.pos, "unclosed parenthesis: the `(` here has no matching `)`");
                }
                self.enter(l.pos)?;
                let inner = self.or(fields, restricted)?;
                self.depth -= 1;
                match self.next() {
                    Some(Lexeme { kind: Kind::RParen, .. }) => Ok(inner),
                    _ => err(l.pos, "unclosed parenthesis: the `(` here has no matching `)`"),
                }
            }
            Kind::Field(field) => {
                if restricted {
                    return err(l.pos, "a field restriction inside another one");
                }
                let restrictable = matches!(
                    self.peek(),
                    Some(Lexeme {
                        kind: Kind::LParen | Kind::Word(_) | Kind::Phrase(_) | Kind::Field(_),
                        ..
                    })
                );
                if !restrictable {
                    return err(l.pos, format!("`{field}:` needs a term right after the colon"));
                }
                let mut inner = self.primary(FieldSet::one(field), true)?;
                inner.pos = l.pos;
                Ok(inner)
            }
            Kind::Word(word) => Ok(Parsed {
                node: word_node(&word, l.pos, fields)?,
                positive: true,
                pos: l.pos,
            }),
            Kind::Phrase(phrase) => {
                let tokens: Vec<QueryToken> = tokenize(&phrase).into_iter().map(QueryToken::from_token).collect();
                let node = tokens_node(tokens, fields).ok_or_else(|| QueryError {
                    position: l.pos,
                    message: nothing_to_search(&phrase),
                })?;
                Ok(Parsed {
                    node,
                    positive: true,
                    pos: l.pos,
                })
            }
            Kind::RParen => err(l.pos, "`)` without a matching `(`"),
            Kind::And => err(l.pos, "AND needs a term before it"),
            Kind::Or => err(l.pos, "OR needs a term before it"),
            Kind::Not => err(l.pos, "NOT needs a term after it"),
        }
    }
}

fn nothing_to_search(text: &str) -> String {
    format!("nothing to search for in `{text}`: punctuation alone is not indexed")
}

fn word_node(word: &str, pos: usize, fields: FieldSet) -> Result<Node, QueryError> {
    if let Some(stem) = word.strip_suffix('*') {
        let stem = stem.trim_end_matches('*');
        if stem.is_empty() {
            return err(pos, "`*` needs a word before it (`time*`)");
        }
        let mut tokens = tokenize(stem);
        return match (tokens.pop(), tokens.is_empty()) {
            (None, _) => err(pos, nothing_to_search(stem)),
            (Some(t), true) => Ok(Node::Prefix { fields, prefix: t.text }),
            (Some(_), false) => err(pos, format!("`*` applies to one word, and `{stem}` is several")),
        };
    }
    let tokens: Vec<QueryToken> = tokenize(word).into_iter().map(QueryToken::from_token).collect();
    tokens_node(tokens, fields).ok_or_else(|| QueryError {
        position: pos,
        message: nothing_to_search(word),
    })
}

fn tokens_node(mut tokens: Vec<QueryToken>, fields: FieldSet) -> Option<Node> {
    match tokens.len() {
        0 => None,
        1 => tokens.pop().map(|token| Node::Term { fields, token }),
        _ => Some(Node::Phrase { fields, tokens }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(fields: FieldSet, text: &str) -> Node {
        Node::Term {
            fields,
            token: QueryToken {
                text: text.into(),
                words: Vec::new(),
            },
        }
    }

    #[test]
    fn precedence_is_not_and_or() {
        let q = parse("a b OR NOT c d").unwrap_or_else(|e| panic!("{e}"));
        let all = FieldSet::ALL;
        assert_eq!(
            q.root,
            Node::Or(vec![
                Node::And(vec![term(all, "a"), term(all, "b")]),
                Node::And(vec![Node::Not(Box::new(term(all, "c"))), term(all, "d")]),
            ])
        );
        let q = parse("a AND -b").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            q.root,
            Node::And(vec![term(all, "a"), Node::Not(Box::new(term(all, "b")))])
        );
    }

    #[test]
    fn fields_restrict_terms_phrases_prefixes_and_groups() {
        let fields = |q: &str| parse(q).map(|q| q.fields().iter().collect::<Vec<_>>());
        assert_eq!(fields("body:a -name:b"), Ok(vec![Field::Body, Field::Name]));
        assert_eq!(fields("a"), Ok(Field::ALL.to_vec()));
        let body = FieldSet::one(Field::Body);
        assert_eq!(parse("body:Timeout").map(|q| q.root), Ok(term(body, "timeout")));
        assert_eq!(
            parse("payload:pre*").map(|q| q.root),
            Ok(Node::Prefix {
                fields: FieldSet::one(Field::Payload),
                prefix: "pre".into()
            })
        );
        let q = parse("name:\"a phrase\"").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(q.root, Node::Phrase { fields, .. } if fields == FieldSet::one(Field::Name)));
        assert_eq!(
            parse("body:(a OR b)").map(|q| q.root),
            Ok(Node::Or(vec![term(body, "a"), term(body, "b")]))
        );
    }

    #[test]
    fn words_read_like_records() {
        let q = parse("PoolTimeout").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            q.root,
            Node::Term {
                fields: FieldSet::ALL,
                token: QueryToken {
                    text: "pooltimeout".into(),
                    words: vec!["pool".into(), "timeout".into()]
                }
            }
        );
        assert!(matches!(
            parse("error=timeout").map(|q| q.root),
            Ok(Node::Phrase { .. })
        ));
        assert!(matches!(parse("\"Timeout\"").map(|q| q.root), Ok(Node::Term { .. })));
        // Colons that are not a field restriction.
        for q in ["ERROR:", "std::io", "http://host/x", "12:30:45"] {
            assert!(parse(q).is_ok(), "{q}");
        }
        assert!(matches!(parse("--verbose").map(|q| q.root), Ok(Node::Term { .. })));
        // Punctuation between terms is dropped, as in a record.
        assert_eq!(parse("a - b :").map(|q| q.root), parse("a b").map(|q| q.root));
    }

    #[test]
    fn errors_name_their_position() {
        let cases: &[(&str, usize, &str)] = &[
            ("", 0, "empty"),
            ("   ", 0, "empty"),
            ("NOT a", 0, "needs a term"),
            ("-a -b", 0, "needs a term"),
            ("a OR NOT b", 5, "needs a term"),
            ("a \"b c", 2, "unclosed quote"),
            ("(a OR b", 0, "unclosed parenthesis"),
            ("a (b (c)", 2, "unclosed parenthesis"),
            ("a b)", 3, "without a matching"),
            ("()", 0, "empty parentheses"),
            ("foo:bar", 0, "unknown field `foo`"),
            ("a host:x", 2, "unknown field `host`"),
            ("a AND", 2, "AND needs a term after"),
            ("OR a", 0, "OR needs a term before"),
            ("a OR", 2, "OR needs a term after"),
            ("a NOT", 2, "NOT needs a term after"),
            ("!!! ,", 0, "nothing to search"),
            ("a \"!!!\"", 2, "nothing to search"),
            ("body:!!!", 0, "needs a term right after"),
            ("x *", 2, "`*` needs a word"),
            ("a=b*", 0, "one word"),
            ("body: x", 0, "needs a term right after"),
            ("body:name:x", 5, "inside another"),
        ];
        let deep_parens = format!("a {}b{}", "(".repeat(65), ")".repeat(65));
        let deep_nots = format!("a {}b", "NOT ".repeat(65));
        let deep: &[(&str, usize, &str)] = &[
            (&deep_parens, 66, "nested more than 64"),
            (&deep_nots, 258, "nested more than 64"),
        ];
        assert!(parse(&format!("a {}b{}", "(".repeat(64), ")".repeat(64))).is_ok());
        for &(q, position, msg) in cases.iter().chain(deep) {
            match parse(q) {
                Ok(parsed) => panic!("{q:?} parsed: {parsed:?}"),
                Err(e) => {
                    assert_eq!(e.position, position, "{q:?}: {e}");
                    assert!(e.message.contains(msg), "{q:?}: {e}");
                    assert!(e.to_string().starts_with(&format!("at position {position}: ")));
                }
            }
        }
    }
}
