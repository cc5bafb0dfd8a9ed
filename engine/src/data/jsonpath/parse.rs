//! The JSONPath grammar Step Functions accepts (Jayway dialect): the syntax tree and a
//! hand-written recursive-descent parser. Parsing never panics; every malformed input is a
//! `String` error that names the path and the position.

use crate::data::cursor;
use serde_json::Value;

/// What a path starts from.
#[derive(Debug, Clone, PartialEq)]
pub enum Root {
    /// `$`: the value the path is applied to.
    Input,
    /// `$$`: the context object.
    Context,
    /// `$name`: a JSONPath variable.
    Variable(String),
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    /// `.name` or `['name']`.
    Child(String),
    /// `[n]`; negative counts from the end.
    Index(i64),
    /// `.*` or `[*]`.
    Wildcard,
    /// `[a:b]`, `[a:]`, `[:b]` (no step, as in Jayway).
    Slice {
        start: Option<i64>,
        end: Option<i64>,
    },
    /// `[0,1,…]`.
    Indexes(Vec<i64>),
    /// `['a','b',…]`.
    Names(Vec<String>),
    /// `[?(…)]`.
    Filter(Filter),
    /// `..x`: applies `x` at every depth.
    Descend(Box<Segment>),
}

impl Segment {
    /// Jayway calls a path *definite* when it can select at most one value.
    pub fn is_definite(&self) -> bool {
        matches!(self, Segment::Child(_) | Segment::Index(_))
    }
}

/// A filter expression (`?(…)`).
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    Or(Box<Filter>, Box<Filter>),
    And(Box<Filter>, Box<Filter>),
    Not(Box<Filter>),
    /// A bare operand: true when the path selects something.
    Exists(Operand),
    Compare(Operand, CmpOp, Operand),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A side of a filter comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// `@…`: relative to the element being tested.
    Current(Vec<Segment>),
    /// `$…`: relative to the path's root value.
    Root(Vec<Segment>),
    Literal(Value),
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    pub root: Root,
    pub segments: Vec<Segment>,
}

impl Path {
    pub fn is_definite(&self) -> bool {
        self.segments.iter().all(Segment::is_definite)
    }
}

/// Parses a whole path (`$…`, `$$…`, `$var…`).
pub fn parse(text: &str) -> Result<Path, String> {
    let mut p = Parser::new(text, "JSONPath");
    let path = p.path()?;
    if !p.at_end() {
        return Err(p.error("unexpected character"));
    }
    Ok(path)
}

/// Whether `c` may appear in a variable name (`$name`).
pub fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The grammar of this module's [`Parser`].
enum JsonPathSyntax {}

type Parser<'a> = cursor::Parser<'a, JsonPathSyntax>;

impl Parser<'_> {
    fn path(&mut self) -> Result<Path, String> {
        self.expect('$')?;
        let root = if self.eat('$') {
            Root::Context
        } else if self.peek().is_some_and(is_ident_char) {
            let start = self.pos;
            while self.peek().is_some_and(is_ident_char) {
                self.pos += 1;
            }
            Root::Variable(self.chars[start..self.pos].iter().collect())
        } else {
            Root::Input
        };
        let segments = self.segments(false)?;
        Ok(Path { root, segments })
    }

    /// Reads segments until the input (or, inside a filter, the operand) ends.
    fn segments(&mut self, in_filter: bool) -> Result<Vec<Segment>, String> {
        let mut segments = Vec::new();
        loop {
            match self.peek() {
                Some('.') if self.peek_at(1) == Some('.') => {
                    self.pos += 2;
                    let inner = if self.peek() == Some('[') {
                        self.pos += 1;
                        self.bracket()?
                    } else {
                        self.dot_member(in_filter)?
                    };
                    segments.push(Segment::Descend(Box::new(inner)));
                }
                Some('.') => {
                    self.pos += 1;
                    segments.push(self.dot_member(in_filter)?);
                }
                Some('[') => {
                    self.pos += 1;
                    segments.push(self.bracket()?);
                }
                _ => return Ok(segments),
            }
        }
    }

    /// After a `.`: `*` or a property name. Jayway accepts almost any character in a dotted
    /// name (`$.input-value`), so a name runs up to the next `.`, `[` or `]`; inside a filter it
    /// also stops at whitespace and operator characters.
    fn dot_member(&mut self, in_filter: bool) -> Result<Segment, String> {
        if self.eat('*') {
            return Ok(Segment::Wildcard);
        }
        let start = self.pos;
        while let Some(c) = self.peek() {
            let stop = c == '.'
                || c == '['
                || c == ']'
                || (in_filter && (c.is_whitespace() || "()=!<>&|,]".contains(c)));
            if stop {
                break;
            }
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.error("expected a property name"));
        }
        Ok(Segment::Child(self.chars[start..self.pos].iter().collect()))
    }

    /// After a `[`: names, indexes, a slice, `*` or a filter, then `]`.
    fn bracket(&mut self) -> Result<Segment, String> {
        self.skip_ws();
        let segment = match self.peek() {
            Some('*') => {
                self.pos += 1;
                Segment::Wildcard
            }
            Some('?') => {
                self.pos += 1;
                self.skip_ws();
                self.expect('(')?;
                let filter = self.filter_or()?;
                self.skip_ws();
                self.expect(')')?;
                Segment::Filter(filter)
            }
            Some('\'' | '"') => {
                let mut names = vec![self.quoted()?];
                self.skip_ws();
                while self.eat(',') {
                    self.skip_ws();
                    names.push(self.quoted()?);
                    self.skip_ws();
                }
                if names.len() == 1 {
                    Segment::Child(names.remove(0))
                } else {
                    Segment::Names(names)
                }
            }
            _ => self.index_or_slice()?,
        };
        self.skip_ws();
        self.expect(']')?;
        Ok(segment)
    }

    /// A quoted name. A backslash escapes only the enclosing quote character (and itself
    /// before that quote); any other backslash is kept, which is what AWS does with
    /// `$['Test\""Name"']` (the key keeps its backslash).
    fn quoted(&mut self) -> Result<String, String> {
        let quote = self.peek().ok_or_else(|| self.error("expected a quote"))?;
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string")),
                Some('\\') if self.peek_at(1) == Some(quote) => {
                    out.push(quote);
                    self.pos += 2;
                }
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn integer(&mut self) -> Result<Option<i64>, String> {
        self.skip_ws();
        let start = self.pos;
        if self.peek() == Some('-') {
            self.pos += 1;
        }
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits: String = self.chars[start..self.pos].iter().collect();
        self.skip_ws();
        if digits.is_empty() {
            return Ok(None);
        }
        digits
            .parse()
            .map(Some)
            .map_err(|_| self.error("invalid array index"))
    }

    fn index_or_slice(&mut self) -> Result<Segment, String> {
        let first = self.integer()?;
        if self.eat(':') {
            let end = self.integer()?;
            return Ok(Segment::Slice { start: first, end });
        }
        let first =
            first.ok_or_else(|| self.error("expected an index, a name, '*' or a filter"))?;
        let mut indexes = vec![first];
        while self.eat(',') {
            indexes.push(
                self.integer()?
                    .ok_or_else(|| self.error("expected an index"))?,
            );
        }
        Ok(if indexes.len() == 1 {
            Segment::Index(first)
        } else {
            Segment::Indexes(indexes)
        })
    }

    fn filter_or(&mut self) -> Result<Filter, String> {
        let mut left = self.filter_and()?;
        loop {
            self.skip_ws();
            if self.peek() == Some('|') && self.peek_at(1) == Some('|') {
                self.pos += 2;
                left = Filter::Or(Box::new(left), Box::new(self.filter_and()?));
            } else {
                return Ok(left);
            }
        }
    }

    fn filter_and(&mut self) -> Result<Filter, String> {
        let mut left = self.filter_unary()?;
        loop {
            self.skip_ws();
            if self.peek() == Some('&') && self.peek_at(1) == Some('&') {
                self.pos += 2;
                left = Filter::And(Box::new(left), Box::new(self.filter_unary()?));
            } else {
                return Ok(left);
            }
        }
    }

    fn filter_unary(&mut self) -> Result<Filter, String> {
        self.skip_ws();
        if self.peek() == Some('!') && self.peek_at(1) != Some('=') {
            self.pos += 1;
            return Ok(Filter::Not(Box::new(self.filter_unary()?)));
        }
        if self.eat('(') {
            let inner = self.filter_or()?;
            self.skip_ws();
            self.expect(')')?;
            return Ok(inner);
        }
        let left = self.operand()?;
        self.skip_ws();
        let op = match (self.peek(), self.peek_at(1)) {
            (Some('='), Some('=')) => Some((CmpOp::Eq, 2)),
            (Some('!'), Some('=')) => Some((CmpOp::Ne, 2)),
            (Some('<'), Some('=')) => Some((CmpOp::Le, 2)),
            (Some('>'), Some('=')) => Some((CmpOp::Ge, 2)),
            (Some('<'), _) => Some((CmpOp::Lt, 1)),
            (Some('>'), _) => Some((CmpOp::Gt, 1)),
            _ => None,
        };
        match op {
            Some((op, len)) => {
                self.pos += len;
                let right = self.operand()?;
                Ok(Filter::Compare(left, op, right))
            }
            None => Ok(Filter::Exists(left)),
        }
    }

    fn operand(&mut self) -> Result<Operand, String> {
        self.skip_ws();
        match self.peek() {
            Some('@') => {
                self.pos += 1;
                Ok(Operand::Current(self.segments(true)?))
            }
            Some('$') => {
                self.pos += 1;
                Ok(Operand::Root(self.segments(true)?))
            }
            Some('\'' | '"') => Ok(Operand::Literal(Value::String(self.quoted()?))),
            Some(c) if c == '-' || c.is_ascii_digit() => self.number_literal(),
            _ => {
                for (word, value) in [
                    ("true", Value::Bool(true)),
                    ("false", Value::Bool(false)),
                    ("null", Value::Null),
                ] {
                    let end = self.pos + word.len();
                    if end <= self.chars.len()
                        && self.chars[self.pos..end].iter().copied().eq(word.chars())
                    {
                        self.pos = end;
                        return Ok(Operand::Literal(value));
                    }
                }
                Err(self.error("expected a filter operand"))
            }
        }
    }

    fn number_literal(&mut self) -> Result<Operand, String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || "-+.eE".contains(c))
        {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        serde_json::from_str::<serde_json::Number>(&text)
            .map(|n| Operand::Literal(Value::Number(n)))
            .map_err(|_| self.error("invalid number"))
    }
}
