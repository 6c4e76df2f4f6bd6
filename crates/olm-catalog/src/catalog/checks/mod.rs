//! Checks of a whole catalog, rule for rule as `opm validate`: what they find is a list of
//! [`validate::Problem`]s, not an error.

pub mod validate;
