//! The kernel cost model as a user meets it: `superstep cost` prices every
//! calibration point within 5% of its measurement, `superstep calibrate`
//! refits the shipped constants from the shipped points and refuses a bad
//! measurement file naming the line, and a build that names a calibration
//! file (`machine.calibration`) is priced by it.

use crate::common::{Random, query, scratch, superstep};
use superstep::session::Session;
use superstep::target::kernel_cost::points::shape_pairs;
use superstep::target::kernel_cost::{CostTable, shipped_points};

/// `superstep cost` flags for a measurement file's shape.
fn cost_arguments(kernel: &str, shape: &str) -> Vec<String> {
    let kernel = match kernel {
        // The two variants are priced together: the cheaper is the one the
        // kernel runs, and it is the one measured.
        "softmax-split" | "softmax-segmented" => "softmax",
        other => other,
    };
    let mut arguments = vec!["cost".to_string(), kernel.to_string()];
    for pair in shape.split_whitespace() {
        let (key, value) = pair.split_once('=').expect("key=value");
        arguments.push(format!("--{key}"));
        arguments.push(value.to_string());
    }
    arguments.push("--json".to_string());
    arguments
}

#[test]
fn superstep_cost_prints_every_calibration_point_within_five_percent() {
    let text = std::fs::read_to_string("calibration/ipu21.csv").expect("shipped points");
    let mut report = String::new();
    let mut worst: f64 = 0.0;
    let rows = text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.starts_with("kernel,"));
    for row in rows {
        let fields: Vec<&str> = row.splitn(4, ',').collect();
        let (kernel, shape, measured) = (fields[0], fields[1], fields[2]);
        let measured: f64 = measured.parse().expect("cycles");
        let arguments = cost_arguments(kernel, shape);
        let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
        let output = superstep(&arguments);
        assert!(
            output.status.success(),
            "{arguments:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let document: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("one JSON object");
        assert!(document["kernel"].is_string(), "{document}");
        assert!(
            document["terms"]
                .as_array()
                .is_some_and(|terms| !terms.is_empty())
        );
        let cycles = document["cycles"].as_u64().expect("cycles") as f64;
        let error = (cycles - measured) / measured;
        report.push_str(&format!(
            "{kernel:<22} {shape:<48} measured {measured:>7} modelled {cycles:>7} error {:+.2}%\n",
            error * 100.0
        ));
        worst = worst.max(error.abs());
    }
    println!("{report}");
    assert!(worst <= 0.05, "worst {:.2}%:\n{report}", worst * 100.0);
    assert_eq!(report.lines().count(), shipped_points().len());
}

#[test]
fn cost_text_names_its_terms_and_the_rate_it_runs_at() {
    let output = superstep(&[
        "cost",
        "matmul",
        "--rows",
        "82",
        "--reduction",
        "192",
        "--cols",
        "160",
        "--inputs",
        "fp8",
    ]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "matmul (fp8)",
        "matrix unit",
        "19,680",
        "panels",
        "% of the FP8 peak",
    ] {
        assert!(text.contains(expected), "{expected} missing:\n{text}");
    }
    // A zero dimension is refused by the flag, exit 2.
    let zero = superstep(&["cost", "add", "--elements", "0"]);
    assert_eq!(zero.status.code(), Some(2));
}

#[test]
fn calibrate_refits_the_shipped_table_from_the_shipped_points() {
    let folder = scratch("cost_model", "refit");
    let output_file = folder.join("ipu21.txt");
    let output = superstep(&[
        "calibrate",
        "calibration/ipu21.csv",
        "-o",
        output_file.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("worst error after the fit: 0.30%"), "{text}");
    let written = std::fs::read_to_string(&output_file).expect("calibration file");
    let table = CostTable::from_text(&written).expect("reads back");
    for constant in superstep::target::kernel_cost::CONSTANTS {
        let (got, shipped) = (table.get(constant), constant.shipped());
        assert!(
            (got - shipped).abs() <= shipped * 1e-9,
            "{}: {got} vs {shipped}",
            constant.name()
        );
    }
    // The shipped calibration file is exactly that table.
    let shipped_file = std::fs::read_to_string("calibration/ipu21.txt").expect("shipped file");
    assert_eq!(
        CostTable::from_text(&shipped_file).expect("shipped file reads"),
        table
    );
}

#[test]
fn a_bad_measurement_file_is_exit_2_naming_the_line() {
    let folder = scratch("cost_model", "bad");
    let cases = [
        (
            "unknown kernel",
            "conv,rows=4,100\n",
            "line 2: unknown kernel `conv`",
        ),
        (
            "missing column",
            "add,elements=4\n",
            "line 2: missing column `cycles`",
        ),
        (
            "negative cycles",
            "add,elements=4,-378\n",
            "line 2: cycles `-378`",
        ),
        (
            "bad shape",
            "add,elements=four,378\n",
            "line 2: `elements=four`",
        ),
    ];
    for (name, row, expected) in cases {
        let file = folder.join(format!("{}.csv", name.replace(' ', "-")));
        std::fs::write(&file, format!("kernel,shape,cycles\n{row}")).unwrap();
        let output = superstep(&["calibrate", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
    // The output is never written over the measurements.
    let file = folder.join("points.csv");
    std::fs::copy("calibration/ipu21.csv", &file).unwrap();
    let path = file.to_str().unwrap();
    let output = superstep(&["calibrate", path, "-o", path]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        std::fs::read_to_string("calibration/ipu21.csv").unwrap()
    );
}

/// Fitting random points drawn from a known table recovers that table:
/// the fit is a fit, not a copy of the shipped constants.
#[test]
fn calibrate_recovers_a_table_its_points_were_drawn_from() {
    let mut random = Random(7);
    let mut truth = CostTable::shipped();
    for constant in superstep::target::kernel_cost::CONSTANTS {
        let factor = 0.5 + random.below(1000) as f64 / 1000.0;
        truth.set(constant, constant.shipped() * factor);
    }
    let mut rows = String::from("kernel,shape,cycles\n");
    for point in shipped_points() {
        let cycles = superstep::target::kernel_cost::kernel_cost(point.call, &truth).cycles;
        let shape: Vec<String> = shape_pairs(point.call)
            .into_iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        rows.push_str(&format!("{},{},{cycles}\n", point.kernel, shape.join(" ")));
    }
    let folder = scratch("cost_model", "recover");
    let file = folder.join("drawn.csv");
    std::fs::write(&file, rows).unwrap();
    let output = superstep(&["calibrate", file.to_str().unwrap(), "--json"]);
    assert!(output.status.success());
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // Cycles are whole numbers, so the recovered constants are close, not exact.
    assert!(
        document["worst_error_after"].as_f64().unwrap() < 0.005,
        "{document}"
    );
    for constant in document["constants"].as_array().unwrap() {
        let name = constant["name"].as_str().unwrap();
        let expected = truth
            .get(superstep::target::kernel_cost::Constant::from_name(name).expect("known name"));
        let after = constant["after"].as_f64().unwrap();
        assert!(
            (after - expected).abs() <= expected * 0.05 + 0.01,
            "{name}: {after} vs {expected}"
        );
    }
}

/// The compute cycles vit-tiny's estimate charges under `sets`.
fn tiny_compute_cycles(sets: &[&str]) -> u64 {
    Session::new(&query("queries/vit-tiny.toml", sets))
        .build()
        .expect("build")
        .back
        .expect("back half")
        .headline
        .estimate
        .compute_cycles
}

#[test]
fn a_build_is_priced_by_the_calibration_file_it_names() {
    let base = tiny_compute_cycles(&[]);
    // The shipped table as a file prices exactly as the shipped table.
    let shipped = tiny_compute_cycles(&["machine.calibration=calibration/ipu21.txt"]);
    assert_eq!(shipped, base);
    // A slower vector call makes every kernel dearer.
    let folder = scratch("cost_model", "build");
    let slower = folder.join("slower.txt");
    let mut table = CostTable::shipped();
    table.set(
        superstep::target::kernel_cost::Constant::VectorCall,
        table.get(superstep::target::kernel_cost::Constant::VectorCall) * 2.0,
    );
    std::fs::write(&slower, table.to_text("test")).unwrap();
    let set = format!("machine.calibration={}", slower.display());
    let dearer = tiny_compute_cycles(&[&set]);
    assert!(dearer > base, "{dearer} vs {base}");
    // A file that is not a calibration file is exit 2 naming the key.
    let broken = folder.join("broken.txt");
    std::fs::write(&broken, "vector_call = fast\n").unwrap();
    let output = superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--set",
        &format!("machine.calibration={}", broken.display()),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("machine.calibration"), "{stderr}");
    assert!(stderr.contains("vector_call"), "{stderr}");
}
