//! A manifest that breaks the rules, with every problem and the field it is about.

use std::fmt;

/// A manifest that breaks the rules: every problem, each with the field it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    tool: String,
    problems: Vec<FieldProblem>,
}

/// One problem of a [`ManifestError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldProblem {
    field: String,
    message: String,
}

impl FieldProblem {
    /// The field, as a path: `name`, `annotations.readOnlyHint`, `required_scopes[1]`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong, and what to do.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl ManifestError {
    /// An error about `tool` with no problem yet; for crates that read manifests from another
    /// format and report its fields' problems with [`push`](Self::push).
    pub fn new(tool: impl Into<String>) -> Self {
        ManifestError {
            tool: tool.into(),
            problems: Vec::new(),
        }
    }

    /// Adds a problem: the field as a path (`annotations.readOnlyHint`), and what is wrong.
    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.problems.push(FieldProblem {
            field: field.into(),
            message: message.into(),
        });
    }

    pub(crate) fn push_rules(&mut self, problems: Vec<capability_rules::Problem>) {
        for problem in problems {
            let field = match problem.subject {
                capability_rules::Subject::Name => "name".to_owned(),
                capability_rules::Subject::Provider => "provider".to_owned(),
                capability_rules::Subject::Version => "version".to_owned(),
                capability_rules::Subject::ReadOnlyAndDestructive => "destructive".to_owned(),
                capability_rules::Subject::Scope(i) => format!("required_scopes[{i}]"),
            };
            self.push(field, problem.violation.to_string());
        }
    }

    /// Adds every problem of `other`, an error about the same tool.
    pub(crate) fn absorb(&mut self, other: ManifestError) {
        self.problems.extend(other.problems);
    }

    /// `Ok` when no problem was pushed, else the error.
    pub fn into_result(self) -> Result<(), ManifestError> {
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(self)
        }
    }

    /// The tool's name as given (or a description of where it was, when it had none).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Every problem found.
    pub fn problems(&self) -> &[FieldProblem] {
        &self.problems
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid tool `{}`", self.tool)?;
        match self.problems.as_slice() {
            [one] => write!(f, ": `{}`: {}", one.field, one.message),
            many => {
                f.write_str(":")?;
                for problem in many {
                    write!(f, "\n  - `{}`: {}", problem.field, problem.message)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ManifestError {}
