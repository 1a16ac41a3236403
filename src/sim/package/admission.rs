//! Whether a package may be executed for a compiled program: what the
//! package simulator checks before it allocates a tile image or runs a
//! step, so that a package file with a valid digest but wrong contents is
//! refused with the part named, never a panic, an endless loop or an
//! allocation its header does not describe.
//!
//! A package is admitted when `verify` passes it (every index, address and
//! count inside the geometry it declares: `package::verify`) and that
//! geometry is the program's: the same tiles, one placed allocation per
//! program allocation on the same tile with the same size, instances and
//! memory class, every kernel run one of the program's (the kernels trust
//! their shapes), every Repeat iterating as often as the program's Repeat,
//! every phase's step path naming an exchange step and every stored-row
//! index a row of the phase's table.

use std::collections::{BTreeSet, HashMap};

use crate::expand::program::{KernelRun, LowProgram, Step};
use crate::package::Package;
use crate::package::verify::verify_package;

/// How many mismatches a refusal lists.
const LISTED: usize = 5;

/// A package that [`admit`] let through for a program: the only way into
/// `simulate_admitted`, so the checks run once per simulation.
#[derive(Clone, Copy, Debug)]
pub struct Admitted<'a> {
    package: &'a Package,
}

impl<'a> Admitted<'a> {
    pub fn package(&self) -> &'a Package {
        self.package
    }
}

/// Why [`admit`] refused a package: every problem found, in the order the
/// checks ran (shown as the first few, then a count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    problems: Vec<String>,
}

impl Refusal {
    /// Each problem, in one sentence.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&render(&self.problems))
    }
}

impl std::error::Error for Refusal {}

/// `Ok` when `package` may be executed for `program`; `Err` names what does
/// not fit.
pub fn admit<'a>(package: &'a Package, program: &LowProgram) -> Result<Admitted<'a>, Refusal> {
    let mut problems = Vec::new();
    let verification = verify_package(package);
    if !verification.passed() {
        problems.extend(verification.failures.iter().cloned());
        let unlisted = verification.failure_count - verification.failures.len() as u64;
        if unlisted > 0 {
            problems.push(format!("... and {unlisted} more verify failures"));
        }
        return Err(Refusal { problems });
    }
    if package.tiles != program.tiles {
        problems.push(format!(
            "the package is for {} tiles, the program for {}",
            package.tiles, program.tiles
        ));
    }
    if package.allocations.len() != program.allocations.len() {
        problems.push(format!(
            "the package places {} allocations, the program has {}",
            package.allocations.len(),
            program.allocations.len()
        ));
    }
    for (index, (placed, allocation)) in package
        .allocations
        .iter()
        .zip(&program.allocations)
        .enumerate()
    {
        if placed.tile != allocation.tile
            || placed.bytes != allocation.bytes
            || placed.iterations != allocation.iterations
            || placed.class != allocation.class
        {
            problems.push(format!(
                "allocation {index}: placed as {} bytes x {} on tile {} ({:?}), the program's is \
                 {} bytes x {} on tile {} ({:?})",
                placed.bytes,
                placed.iterations,
                placed.tile,
                placed.class,
                allocation.bytes,
                allocation.iterations,
                allocation.tile,
                allocation.class
            ));
        }
    }
    if problems.is_empty() {
        problems.extend(foreign_kernels(package, program));
    }
    let program_repeats = repeat_counts(&program.steps);
    let mut package_repeats = BTreeSet::new();
    collect_repeats(&package.steps, &mut package_repeats);
    for iterations in package_repeats.difference(&program_repeats) {
        problems.push(format!(
            "a Repeat iterates {iterations} times; the program's Repeats iterate {:?}",
            program_repeats
        ));
    }
    problems.extend(phase_problems(package));
    if problems.is_empty() {
        Ok(Admitted { package })
    } else {
        Err(Refusal { problems })
    }
}

/// What is wrong with the package's phases on their own, program or not:
/// a step path not naming an exchange step, a stored row for a tile
/// without a row. `superstep verify` refuses these too
/// (`super::rows_check`).
pub fn phase_problems(package: &Package) -> Vec<String> {
    let mut problems = Vec::new();
    for phase in &package.phases {
        match step_at(&package.steps, &phase.step_path) {
            Some(Step::Exchange { .. }) => {}
            _ => problems.push(format!(
                "phase {}: its step path {:?} does not name an exchange step",
                phase.key, phase.step_path
            )),
        }
        for (tile, &stored) in phase.stored_rows.iter().enumerate() {
            let rows = phase.rows.get(tile).map_or(0, Vec::len);
            if stored != u32::MAX && rows == 0 {
                problems.push(format!(
                    "phase {}, tile {tile}: a stored row ({stored}) for a tile without a row",
                    phase.key
                ));
            }
        }
    }
    problems
}

/// The package's kernel runs that are not the program's: every run, its
/// locations taken back to offsets inside their allocations, must be one
/// of the program's runs (as often as the program has it). The shared
/// kernels trust their parameters (rows, columns, strides); the program's
/// were made by this compile, a file's are not.
fn foreign_kernels(package: &Package, program: &LowProgram) -> Vec<String> {
    let mut expected: HashMap<&KernelRun, u32> = HashMap::new();
    for_each_run(&program.steps, &mut |run| {
        *expected.entry(run).or_default() += 1;
    });
    let mut problems = Vec::new();
    let mut seen: HashMap<KernelRun, u32> = HashMap::new();
    for_each_run(&package.steps, &mut |run| {
        let mut relative = *run;
        let mut outside = false;
        relative
            .kernel
            .visit_accesses_mut(&mut |_, _, location| match package
                .allocations
                .get(location.allocation.0 as usize)
            {
                Some(placed) if location.offset >= placed.address => {
                    location.offset -= placed.address;
                }
                _ => outside = true,
            });
        let allowed = expected.get(&relative).copied().unwrap_or(0);
        let count = seen.entry(relative).or_default();
        *count += 1;
        if (outside || *count > allowed) && problems.len() < LISTED {
            problems.push(format!(
                "a kernel on tile {} is not one of the program's kernels ({})",
                run.tile,
                variant_name(&run.kernel)
            ));
        }
    });
    problems
}

/// `MatMul` of `MatMul { .. }`.
fn variant_name(kernel: &crate::expand::program::Kernel) -> String {
    format!("{kernel:?}")
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect()
}

fn for_each_run<'a>(steps: &'a [Step], visit: &mut impl FnMut(&'a KernelRun)) {
    for step in steps {
        match step {
            Step::Kernels { runs, .. } => runs.iter().for_each(&mut *visit),
            Step::Repeat { body, .. } => for_each_run(body, visit),
            _ => {}
        }
    }
}

/// `problems` joined, the first few listed and the rest counted.
pub fn render(problems: &[String]) -> String {
    let mut listed: Vec<String> = problems.iter().take(LISTED).cloned().collect();
    if problems.len() > LISTED {
        listed.push(format!("... and {} more", problems.len() - LISTED));
    }
    listed.join("; ")
}

fn repeat_counts(steps: &[Step]) -> BTreeSet<u32> {
    let mut counts = BTreeSet::new();
    collect_repeats(steps, &mut counts);
    counts
}

fn collect_repeats(steps: &[Step], counts: &mut BTreeSet<u32>) {
    for step in steps {
        if let Step::Repeat { iterations, body } = step {
            counts.insert(*iterations);
            collect_repeats(body, counts);
        }
    }
}

/// The step `path` names (indices from the top level, through Repeat
/// bodies).
fn step_at<'a>(steps: &'a [Step], path: &[u32]) -> Option<&'a Step> {
    let (&first, rest) = path.split_first()?;
    let step = steps.get(first as usize)?;
    if rest.is_empty() {
        return Some(step);
    }
    match step {
        Step::Repeat { body, .. } => step_at(body, rest),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal keeps every problem and shows the first few, then a count,
    /// joined as one line.
    #[test]
    fn a_refusal_lists_the_first_problems_and_counts_the_rest() {
        let problems: Vec<String> = (1..=7).map(|index| format!("problem {index}")).collect();
        let refusal = Refusal {
            problems: problems.clone(),
        };
        assert_eq!(refusal.problems(), problems.as_slice());
        assert_eq!(
            refusal.to_string(),
            "problem 1; problem 2; problem 3; problem 4; problem 5; ... and 2 more"
        );
        let short = Refusal {
            problems: vec![String::from(
                "the package is for 4 tiles, the program for 16",
            )],
        };
        assert_eq!(
            short.to_string(),
            "the package is for 4 tiles, the program for 16"
        );
    }
}
