//! The user-facing errors of build queries: `QueryError`, a `miette`
//! diagnostic that points into the build file (or names the `--set`
//! argument) and says what to change, and `Issue`, the located finding that
//! parsing, `--set` and validation produce before a source is attached.
//!
//! This module owns wording and rendering plumbing only. It must not decide
//! what is valid; every error it builds is a user-input error (exit code 2).

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};

/// Where a value came from: a byte range of the build file or a `--set` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    File(Range<usize>),
    Set(String),
}

/// A problem with one field, located but not yet tied to the source text
/// (boxed: results carrying it stay small).
#[derive(Clone, Debug)]
pub struct Issue {
    body: Box<IssueBody>,
}

/// The contents of an `Issue`.
#[derive(Clone, Debug)]
pub struct IssueBody {
    /// The dotted path of the field at fault (e.g. `workload.heads`), if any.
    pub field: Option<String>,
    /// One sentence naming the field and what is wrong.
    pub message: String,
    /// The text of the label at the offending value.
    pub label: String,
    /// What to change.
    pub help: Option<String>,
    pub origin: Origin,
    /// Further places worth showing (e.g. the first of two duplicates).
    pub related: Vec<(String, Origin)>,
    /// The offending line holds a secret: shown with the rest of its line
    /// from the span on masked, never echoed.
    pub secret: bool,
}

impl From<IssueBody> for Issue {
    fn from(body: IssueBody) -> Self {
        Issue {
            body: Box::new(body),
        }
    }
}

impl Issue {
    /// An issue about the field at dotted path `field`, labelled "here".
    pub fn new(field: impl Into<String>, origin: Origin, message: impl Into<String>) -> Self {
        Issue::from(IssueBody {
            field: Some(field.into()),
            message: message.into(),
            label: String::from("here"),
            help: None,
            origin,
            related: Vec::new(),
            secret: false,
        })
    }

    /// Marks the issue's line as holding a secret (masked when shown).
    pub fn secret(mut self) -> Self {
        self.body.secret = true;
        self
    }

    pub fn body(&self) -> &IssueBody {
        &self.body
    }

    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.body.label = label.into();
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.body.help = Some(help.into());
        self
    }

    pub fn related(mut self, label: impl Into<String>, origin: Origin) -> Self {
        self.body.related.push((label.into(), origin));
        self
    }

    /// Attaches the build file's text (named `source_name`).
    pub fn into_error(self, source_name: &str, text: &str) -> QueryError {
        let body = *self.body;
        let masked;
        let text = match (&body.origin, body.secret) {
            (Origin::File(span), true) => {
                masked = mask_to_line_end(text, span.start);
                masked.as_str()
            }
            _ => text,
        };
        match body.origin {
            Origin::File(span) => {
                let mut help = body.help;
                let mut labels = Vec::new();
                for (label, origin) in body.related {
                    match origin {
                        Origin::File(range) => labels.push((label, clamp(range, text.len()))),
                        Origin::Set(argument) => {
                            let note = format!("{label}: --set {argument}");
                            help = Some(match help {
                                Some(existing) => format!("{existing}\n{note}"),
                                None => note,
                            });
                        }
                    }
                }
                QueryError::from_problem(QueryProblem::File(FileProblem {
                    field: body.field,
                    message: body.message,
                    label: body.label,
                    span: clamp(span, text.len()),
                    related: labels,
                    help,
                    source: NamedSource::new(source_name, text.to_string()),
                }))
            }
            Origin::Set(argument) => QueryError::from_problem(QueryProblem::Set(SetProblem {
                argument,
                key: body.field,
                message: body.message,
                help: body.help,
            })),
        }
    }
}

/// `text` with every character from byte `start` to the end of its line
/// replaced by `*` (a secret is never shown; the layout stays).
fn mask_to_line_end(text: &str, start: usize) -> String {
    let start = (0..=start.min(text.len()))
        .rev()
        .find(|&index| text.is_char_boundary(index))
        .unwrap_or(0);
    let end = text[start..]
        .find('\n')
        .map_or(text.len(), |offset| start + offset);
    let stars = "*".repeat(text[start..end].chars().count());
    format!("{}{stars}{}", &text[..start], &text[end..])
}

/// Keeps a span inside the text so rendering never indexes past the end.
fn clamp(span: Range<usize>, length: usize) -> Range<usize> {
    let start = span.start.min(length);
    let end = span.end.clamp(start, length);
    start..end
}

/// A build query that could not be read, parsed or validated.
#[derive(Debug)]
pub struct QueryError {
    problem: Box<QueryProblem>,
}

/// What went wrong, by where it was found.
#[derive(Debug)]
pub enum QueryProblem {
    /// The build file could not be read.
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A problem at a place in the build file.
    File(FileProblem),
    /// A problem with a `--set KEY=VALUE` argument (no file span).
    Set(SetProblem),
}

/// A problem at a place in the build file.
#[derive(Debug)]
pub struct FileProblem {
    /// The dotted path of the field at fault, if the problem is about one field.
    pub field: Option<String>,
    pub message: String,
    pub label: String,
    pub span: Range<usize>,
    pub related: Vec<(String, Range<usize>)>,
    pub help: Option<String>,
    pub source: NamedSource<String>,
}

/// A problem with one `--set` argument.
#[derive(Debug)]
pub struct SetProblem {
    /// The whole argument as given, e.g. `workload.layrs=2`.
    pub argument: String,
    /// The dotted key, when the argument has one.
    pub key: Option<String>,
    pub message: String,
    pub help: Option<String>,
}

impl QueryError {
    pub fn from_problem(problem: QueryProblem) -> Self {
        QueryError {
            problem: Box::new(problem),
        }
    }

    /// A `--set` problem.
    pub fn set(
        argument: &str,
        key: Option<&str>,
        message: impl Into<String>,
        help: Option<String>,
    ) -> Self {
        Self::from_problem(QueryProblem::Set(SetProblem {
            argument: argument.to_string(),
            key: key.map(str::to_string),
            message: message.into(),
            help,
        }))
    }

    pub fn problem(&self) -> &QueryProblem {
        &self.problem
    }

    /// The dotted path of the field at fault, if the error is about one field.
    pub fn field(&self) -> Option<&str> {
        match self.problem.as_ref() {
            QueryProblem::Read { .. } => None,
            QueryProblem::File(problem) => problem.field.as_deref(),
            QueryProblem::Set(problem) => problem.key.as_deref(),
        }
    }

    /// The byte range of the build file the error points at, if any.
    pub fn span(&self) -> Option<Range<usize>> {
        match self.problem.as_ref() {
            QueryProblem::File(problem) => Some(problem.span.clone()),
            QueryProblem::Read { .. } | QueryProblem::Set(_) => None,
        }
    }

    /// The process exit code: 2 for every build-query error, all of which are
    /// user-input errors (including a file that cannot be read).
    pub fn exit_code(&self) -> i32 {
        2
    }
}

impl fmt::Display for QueryError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problem.as_ref() {
            QueryProblem::Read { path, source } => {
                write!(
                    formatter,
                    "cannot read build query `{}`: {source}",
                    path.display()
                )
            }
            QueryProblem::File(problem) => formatter.write_str(&problem.message),
            QueryProblem::Set(problem) => {
                write!(formatter, "--set {}: {}", problem.argument, problem.message)
            }
        }
    }
}

impl std::error::Error for QueryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.problem.as_ref() {
            QueryProblem::Read { source, .. } => Some(source),
            QueryProblem::File(_) | QueryProblem::Set(_) => None,
        }
    }
}

impl Diagnostic for QueryError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        let code = match self.problem.as_ref() {
            QueryProblem::Read { .. } => "query::read",
            QueryProblem::File(_) => "query::invalid",
            QueryProblem::Set(_) => "query::set",
        };
        Some(Box::new(code))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self.problem.as_ref() {
            QueryProblem::Read { .. } => Some(Box::new(
                "check the path of the build file (queries/*.toml holds the shipped ones)",
            )),
            QueryProblem::File(problem) => problem
                .help
                .as_ref()
                .map(|help| Box::new(help) as Box<dyn fmt::Display>),
            QueryProblem::Set(problem) => problem
                .help
                .as_ref()
                .map(|help| Box::new(help) as Box<dyn fmt::Display>),
        }
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        match self.problem.as_ref() {
            QueryProblem::File(problem) => Some(&problem.source),
            QueryProblem::Read { .. } | QueryProblem::Set(_) => None,
        }
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        match self.problem.as_ref() {
            QueryProblem::File(problem) => {
                let primary = LabeledSpan::new_primary_with_span(
                    Some(problem.label.clone()),
                    problem.span.clone(),
                );
                let related = problem.related.iter().map(|(label, span)| {
                    LabeledSpan::new_with_span(Some(label.clone()), span.clone())
                });
                Some(Box::new(std::iter::once(primary).chain(related)))
            }
            QueryProblem::Read { .. } | QueryProblem::Set(_) => None,
        }
    }
}

/// A build-file error as the terminal shows it: miette's graphical report
/// with the offending source span, or the plain message when it cannot
/// be rendered.
pub fn render_query_error(error: &QueryError) -> String {
    let mut rendered = String::new();
    // Lines are not wrapped: keys, paths and suggested `--set`s stay whole.
    let handler = miette::GraphicalReportHandler::new().with_wrap_lines(false);
    if handler.render_report(&mut rendered, error).is_err() {
        rendered = error.to_string();
    }
    rendered
}
