//! A character cursor shared by the hand-written parsers of this module (JSONPath, intrinsic
//! calls): position, look-ahead, and errors that quote the text and the position.

pub(crate) struct Cursor<'a> {
    pub chars: Vec<char>,
    pub pos: usize,
    text: &'a str,
    /// What is parsed, for messages: "JSONPath", "intrinsic function".
    kind: &'static str,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str, kind: &'static str) -> Self {
        Cursor {
            chars: text.chars().collect(),
            pos: 0,
            text,
            kind,
        }
    }

    pub fn error(&self, what: &str) -> String {
        format!(
            "Invalid {} '{}': {} at position {}",
            self.kind, self.text, what, self.pos
        )
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.chars.len()
    }

    pub fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    pub fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    pub fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(&format!("expected '{c}'")))
        }
    }

    pub fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    pub fn starts_with(&self, word: &str) -> bool {
        let end = self.pos + word.chars().count();
        end <= self.chars.len() && self.chars[self.pos..end].iter().copied().eq(word.chars())
    }
}

/// A parser over a [`Cursor`]; `K` tells one grammar's parser from another's, so each grammar
/// adds its own methods (`impl Parser<'_, MyGrammar>`) without clashing.
pub(crate) struct Parser<'a, K> {
    cursor: Cursor<'a>,
    _grammar: std::marker::PhantomData<K>,
}

impl<'a, K> Parser<'a, K> {
    pub fn new(text: &'a str, kind: &'static str) -> Self {
        Parser {
            cursor: Cursor::new(text, kind),
            _grammar: std::marker::PhantomData,
        }
    }
}

impl<'a, K> std::ops::Deref for Parser<'a, K> {
    type Target = Cursor<'a>;
    fn deref(&self) -> &Cursor<'a> {
        &self.cursor
    }
}

impl<K> std::ops::DerefMut for Parser<'_, K> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.cursor
    }
}
