//! `olm.constraint` `cel` rules: a real CEL evaluator (the `cel` crate) over the candidate
//! bundle's `properties`, with upstream's `semver_compare(a, b)` (-1, 0 or 1).

use std::fmt;
use std::sync::Arc;

use cel::{Context, ExecutionError, Program, Value};

use crate::catalog::fbc::Property;
use crate::catalog::semver_range::parse_version;

pub struct CelRule {
    source: String,
    program: Program,
}

impl fmt::Debug for CelRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CelRule")
            .field("source", &self.source)
            .finish()
    }
}

impl CelRule {
    pub fn compile(source: &str) -> Result<CelRule, String> {
        let program = Program::compile(source)
            .map_err(|e| format!("CEL rule {source:?} does not compile: {e}"))?;
        Ok(CelRule {
            source: source.to_string(),
            program,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// True only when the rule evaluates to `true`; an evaluation error (a missing field,
    /// a bad version) means the candidate does not match, as upstream treats it.
    pub fn matches(&self, properties: &[Property]) -> bool {
        self.evaluate(properties).unwrap_or(false)
    }

    pub fn evaluate(&self, properties: &[Property]) -> Result<bool, String> {
        let mut context = Context::default();
        let props = cel::to_value(properties).map_err(|e| e.to_string())?;
        context.add_variable_from_value("properties", props);
        context
            .add_function("semver_compare", semver_compare)
            .map_err(|e| format!("{e:?}"))?;
        match self.program.execute(&context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "CEL rule {:?} returned {other:?}, not a bool",
                self.source
            )),
            Err(e) => Err(format!("CEL rule {:?} failed: {e}", self.source)),
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
