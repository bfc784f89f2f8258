//! A small ring buffer with a few idioms, for the differential test against ast-grep.
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read};

#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: Vec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T: Clone> Ring<T> {
    pub fn new(capacity: usize) -> Self {
        let items = vec![None; capacity];
        Ring { items, head: 0, len: 0 }
    }

    pub fn push(&mut self, value: T) -> Option<T> {
        let cap = self.items.len();
        let idx = (self.head + self.len) % cap;
        let old = self.items[idx].take();
        self.items[idx] = Some(value);
        if self.len == cap {
            self.head = (self.head + 1) % cap;
        } else {
            self.len += 1;
        }
        old
    }

    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.items[self.head].take();
        self.head = (self.head + 1) % self.items.len();
        self.len -= 1;
        value
    }

    pub fn peek(&self) -> Option<&T> {
        self.items.get(self.head).and_then(|x| x.as_ref())
    }
}

impl<T: fmt::Display> fmt::Display for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for item in self.items.iter().flatten() {
            write!(f, "{} ", item)?;
        }
        write!(f, "]")
    }
}

fn count_words(text: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for word in text.split_whitespace() {
        let word = word.to_lowercase();
        *counts.entry(word).or_insert(0) += 1;
    }
    counts
}

fn read_all() -> io::Result<String> {
    let mut buf = String::new();
    io::stdin().read_to_string(&mut buf)?;
    Ok(buf)
}

fn parse_pair(s: &str) -> Option<(i32, i32)> {
    let mut parts = s.split(',');
    let a = parts.next()?.trim().parse().ok()?;
    let b = parts.next()?.trim().parse().ok()?;
    Some((a, b))
}

fn main() {
    let mut ring = Ring::new(3);
    for i in 0..5 {
        ring.push(i);
    }
    let first = ring.pop().unwrap();
    let second = ring.peek().unwrap();
    println!("{} {}", first, second);
    let text = read_all().unwrap();
    let counts = count_words(&text);
    let total = counts.values().sum::<usize>();
    let pair = parse_pair("1, 2").expect("a pair");
    let x = pair.0;
    let x = x;
    match parse_pair("3,4") {
        Some((a, b)) => println!("{}", a + b),
        None => println!("none"),
    }
    if let Some(v) = ring.pop() {
        println!("{}", v);
    }
    let doubled: Vec<i32> = vec![1, 2, 3].iter().map(|x| x * 2).collect();
    println!("{:?} {} {}", doubled, total, x);
}

pub struct Meters(f64);

impl Default for Meters {
    fn default() -> Self {
        Meters(0.0)
    }
}

impl Meters {
    pub fn value(&self) -> f64 {
        self.0
    }
}

pub fn describe(n: Option<i32>) -> String {
    match n {
        Some(0) => "zero".to_string(),
        Some(v) => format!("{}", v),
        None => String::new(),
    }
}
