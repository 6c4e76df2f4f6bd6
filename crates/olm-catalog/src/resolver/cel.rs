//! `olm.constraint` `cel` rules: a real CEL evaluator (the `cel` crate) over the candidate
//! bundle's `properties`, with upstream's `semver_compare(a, b)` (-1, 0 or 1).
//!
//! The `cel` crate's parser and evaluator recurse over the expression: a rule nested a few
//! dozen levels deep overflows a 2 MiB thread stack (tokio's) and aborts the process, and
//! nested comprehensions over many properties take time without bound. Catalog authors are
//! strangers, so a rule must pass [`MAX_CEL_TOKENS`] and [`MAX_CEL_NESTING`] before it is
//! parsed, [`MAX_CEL_DEPTH`] once parsed, and [`MAX_CEL_COST`] before each evaluation.

use std::fmt;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr};
use cel::parser::Expression;
use cel::{Context, ExecutionError, Program, Value};

use crate::catalog::model::fbc::Property;
use crate::catalog::model::semver_range::parse_version;

/// Tokens (identifiers, literals, operators, brackets) in one rule. Real rules use tens.
pub const MAX_CEL_TOKENS: usize = 512;
/// Brackets (`(`, `[`, `{`) open at once in one rule; the parser needs ~180 KiB of stack per
/// level in a debug build, so 8 stays well inside a 2 MiB stack.
pub const MAX_CEL_NESTING: usize = 8;
/// Depth of the parsed expression (`a + b + c` is 3 deep): evaluation recurses this deep.
pub const MAX_CEL_DEPTH: usize = 32;
/// Estimated evaluation steps: expression nodes × (n + 1) ^ (comprehensions nested inside each
/// other), where n is the number of properties or the length of the longest list or map in
/// them, whichever is more. One rule is evaluated once per candidate bundle.
pub const MAX_CEL_COST: u64 = 1_000_000;

/// Why a rule is refused or its evaluation failed. Rules shown abbreviated (quoted, cut
/// at 80 characters) in the limit errors, quoted whole otherwise.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    #[error("CEL rule {rule} has {tokens} tokens, more than the limit of {MAX_CEL_TOKENS}")]
    TooManyTokens { rule: String, tokens: usize },
    #[error(
        "CEL rule {rule} nests brackets {nesting} deep, more than the limit of {MAX_CEL_NESTING}"
    )]
    TooNested { rule: String, nesting: usize },
    #[error("CEL rule {rule:?} does not compile: {message}")]
    Compile { rule: String, message: String },
    #[error(
        "CEL rule {rule} is {depth} levels deep once parsed, more than the limit of {MAX_CEL_DEPTH}"
    )]
    TooDeep { rule: String, depth: usize },
    #[error(
        "CEL rule {rule} would take an estimated {cost} steps over {properties} properties, \
         more than the limit of {MAX_CEL_COST}"
    )]
    TooCostly {
        rule: String,
        cost: u64,
        properties: usize,
    },
    /// The properties do not convert to CEL values.
    #[error("{0}")]
    Properties(String),
    /// `semver_compare` could not be declared.
    #[error("{0}")]
    Function(String),
    #[error("CEL rule {rule:?} returned {returned}, not a bool")]
    NotABool { rule: String, returned: String },
    #[error("CEL rule {rule:?} failed: {message}")]
    Failed { rule: String, message: String },
}

pub struct CelRule {
    source: String,
    program: Program,
    /// Expression nodes, and how deeply comprehensions (`all`, `exists`, `map`…) nest.
    nodes: u64,
    comprehension_depth: u32,
}

impl fmt::Debug for CelRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CelRule")
            .field("source", &self.source)
            .finish()
    }
}

impl CelRule {
    pub fn compile(source: &str) -> Result<CelRule, CelError> {
        let (tokens, nesting) = lexical_shape(source);
        if tokens > MAX_CEL_TOKENS {
            return Err(CelError::TooManyTokens {
                rule: abbreviated(source),
                tokens,
            });
        }
        if nesting > MAX_CEL_NESTING {
            return Err(CelError::TooNested {
                rule: abbreviated(source),
                nesting,
            });
        }
        let program = Program::compile(source).map_err(|e| CelError::Compile {
            rule: source.to_string(),
            message: e.to_string(),
        })?;
        let shape = tree_shape(program.expression());
        if shape.depth > MAX_CEL_DEPTH {
            return Err(CelError::TooDeep {
                rule: abbreviated(source),
                depth: shape.depth,
            });
        }
        Ok(CelRule {
            source: source.to_string(),
            program,
            nodes: shape.nodes,
            comprehension_depth: shape.comprehension_depth,
        })
    }

    /// The estimated evaluation steps over `properties` (see [`MAX_CEL_COST`]). A loop may
    /// run over `properties` or over any list or map inside them: each is counted as long as
    /// the longest of them.
    pub fn cost(&self, properties: &[Property]) -> u64 {
        let per_loop = iterable_bound(properties) + 1;
        per_loop
            .checked_pow(self.comprehension_depth)
            .and_then(|loops| loops.checked_mul(self.nodes))
            .unwrap_or(u64::MAX)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// True only when the rule evaluates to `true`; an evaluation error (a missing field,
    /// a bad version) means the candidate does not match, as upstream treats it.
    pub fn matches(&self, properties: &[Property]) -> bool {
        self.evaluate(properties).unwrap_or(false)
    }

    pub fn evaluate(&self, properties: &[Property]) -> Result<bool, CelError> {
        let cost = self.cost(properties);
        if cost > MAX_CEL_COST {
            return Err(CelError::TooCostly {
                rule: abbreviated(&self.source),
                cost,
                properties: properties.len(),
            });
        }
        let mut context = Context::default();
        let props = cel::to_value(properties).map_err(|e| CelError::Properties(e.to_string()))?;
        context.add_variable_from_value("properties", props);
        context
            .add_function("semver_compare", semver_compare)
            .map_err(|e| CelError::Function(format!("{e:?}")))?;
        match self.program.execute(&context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(CelError::NotABool {
                rule: self.source.clone(),
                returned: format!("{other:?}"),
            }),
            Err(e) => Err(CelError::Failed {
                rule: self.source.clone(),
                message: e.to_string(),
            }),
        }
    }
}

fn semver_compare(a: Arc<String>, b: Arc<String>) -> Result<Value, ExecutionError> {
    let parse = |s: &str| {
        parse_version(s)
            .map_err(|e| ExecutionError::function_error("semver_compare", format!("{s:?}: {e}")))
    };
    let ordering = parse(&a)?.cmp_precedence(&parse(&b)?);
    Ok(Value::Int(ordering as i64))
}

/// The most items a loop can run over: `properties` itself, or the longest list or map
/// inside them.
fn iterable_bound(properties: &[Property]) -> u64 {
    use serde_json::Value as Json;
    let mut longest = properties.len();
    let mut stack: Vec<&Json> = properties.iter().map(|p| &p.value).collect();
    while let Some(v) = stack.pop() {
        match v {
            Json::Array(list) => {
                longest = longest.max(list.len());
                stack.extend(list);
            }
            Json::Object(map) => {
                longest = longest.max(map.len());
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    longest as u64
}

/// The rule in a message: whole when short, else its start and its length.
fn abbreviated(source: &str) -> String {
    const SHOWN: usize = 80;
    match source.char_indices().nth(SHOWN) {
        None => format!("{source:?}"),
        Some((end, _)) => format!("{:?}… ({} bytes)", &source[..end], source.len()),
    }
}

/// Tokens and the deepest bracket nesting of a rule, by a lexer just good enough to skip
/// string literals (quoted with `'` or `"`, tripled or not, with backslash escapes).
fn lexical_shape(source: &str) -> (usize, usize) {
    let bytes = source.as_bytes();
    let (mut tokens, mut depth, mut deepest) = (0usize, 0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        tokens += 1;
        match b {
            b'\'' | b'"' => {
                let triple = bytes.get(i + 1) == Some(&b) && bytes.get(i + 2) == Some(&b);
                let quote_len = if triple { 3 } else { 1 };
                i += quote_len;
                while i < bytes.len() {
                    if bytes[i] == b'\\' {
                        i += 2;
                    } else if bytes[i] == b
                        && (!triple
                            || (bytes.get(i + 1) == Some(&b) && bytes.get(i + 2) == Some(&b)))
                    {
                        i += quote_len;
                        break;
                    } else {
                        i += 1;
                    }
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
                i += 1;
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' => {
                // An identifier or number (a `.` between identifiers is its own token).
                let dot = b == b'.';
                i += 1;
                while !dot
                    && i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_')
                {
                    i += 1;
                }
            }
            // `||`, `&&`, `==`, `!=`, `<=`, `>=` are one token each.
            b'|' | b'&' | b'=' | b'!' | b'<' | b'>' => {
                i += 1;
                while i < bytes.len() && matches!(bytes[i], b'|' | b'&' | b'=') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    (tokens, deepest)
}

struct TreeShape {
    nodes: u64,
    depth: usize,
    comprehension_depth: u32,
}

/// Walks the parsed expression without recursion (it may be deeper than the stack allows).
fn tree_shape(root: &Expression) -> TreeShape {
    let mut shape = TreeShape {
        nodes: 0,
        depth: 0,
        comprehension_depth: 0,
    };
    // (expression, its depth, comprehensions around it)
    let mut stack: Vec<(&Expression, usize, u32)> = vec![(root, 1, 0)];
    while let Some((e, depth, loops)) = stack.pop() {
        shape.nodes += 1;
        shape.depth = shape.depth.max(depth);
        shape.comprehension_depth = shape.comprehension_depth.max(loops);
        let next = depth + 1;
        match &e.expr {
            Expr::Call(call) => {
                stack.extend(call.target.as_deref().map(|t| (t, next, loops)));
                stack.extend(call.args.iter().map(|a| (a, next, loops)));
            }
            Expr::Comprehension(c) => {
                stack.push((&c.iter_range, next, loops));
                stack.push((&c.accu_init, next, loops));
                stack.push((&c.loop_cond, next, loops + 1));
                stack.push((&c.loop_step, next, loops + 1));
                stack.push((&c.result, next, loops));
            }
            Expr::List(list) => stack.extend(list.elements.iter().map(|x| (x, next, loops))),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        stack.push((&m.key, next, loops));
                        stack.push((&m.value, next, loops));
                    }
                }
            }
            Expr::Struct(st) => {
                for entry in &st.entries {
                    match &entry.expr {
                        EntryExpr::StructField(f) => stack.push((&f.value, next, loops)),
                        EntryExpr::MapEntry(m) => {
                            stack.push((&m.key, next, loops));
                            stack.push((&m.value, next, loops));
                        }
                    }
                }
            }
            Expr::Select(sel) => stack.push((&sel.operand, next, loops)),
            Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
        }
    }
    shape
}

#[cfg(test)]
mod tests;
