//! The kernel cost model: what one call of one kernel costs on one tile,
//! as formulas whose constants are fitted to hardware measurements
//! (design/CALIBRATION.md, shipped as `calibration/ipu21.csv`). This module
//! owns the kernel families and their shapes (`formulas`), the table of
//! fitted constants and its file form (`table`), the measurement files
//! (`points`) and the refit (`fit`). It prices calls; which calls a program
//! makes is the estimate's business (`crate::estimate::compute`).

pub mod composite;
pub mod fit;
pub mod formulas;
pub mod points;
pub mod table;

pub use fit::{FitError, StepOutcome, fit_table, point_error};
pub use formulas::{
    CastInto, KernelCall, KernelCost, MatrixInputs, ProductOutput, Term, call_cycles, kernel_cost,
    matrix_unit_cycles, panels,
};
pub use points::{CalibrationPoint, PointsError, parse_points, shipped_points};
pub use table::{CONSTANTS, Constant, CostTable, TableError};
