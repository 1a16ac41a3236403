//! Resolution of the keys the kernel cost model reads: `machine.calibration`
//! (a calibration file, read through the one input rule) and
//! `planning.matrix_inputs` with `planning.activation_scale` (what the
//! matrix unit multiplies).

use std::path::Path;

use super::{DEFAULT_ACTIVATION_SCALE, FP8_SCALE_RANGE, Resolver};
use crate::build_file::error::{Issue, Origin};
use crate::build_file::schema::{self, QueryFile};
use crate::layout::fp8_activations::Fp8Cast;
use crate::numerics::dot::ProductInputs;
use crate::target::kernel_cost::CostTable;

impl Resolver<'_> {
    /// `machine.calibration`: the calibration file read whole (a regular
    /// file of at most 1 MiB) and parsed; `None`: the shipped table.
    pub(super) fn calibration(
        &self,
        file: &QueryFile,
        base_dir: Option<&Path>,
    ) -> Result<(Option<std::path::PathBuf>, CostTable), Issue> {
        const PATH: &str = "machine.calibration";
        const MAXIMUM_BYTES: u64 = 1 << 20;
        let Some(field) = &file.machine.calibration else {
            return Ok((None, CostTable::shipped()));
        };
        let written = field.get_ref();
        let origin = self.origin(PATH, field);
        let path = match (&origin, base_dir) {
            (Origin::File(_), Some(base)) => base.join(written),
            _ => std::path::PathBuf::from(written),
        };
        let fail = |problem: String, label: &str| {
            Issue::new(
                PATH,
                origin.clone(),
                format!("{PATH} = \"{written}\": `{}` {problem}", path.display()),
            )
            .label(label.to_string())
            .help(
                "write one with `superstep calibrate MEASUREMENTS.csv -o FILE`; paths in the \
                 build file are relative to the build file's folder",
            )
        };
        let text = crate::input_file::read_text(&path, MAXIMUM_BYTES, "a calibration file")
            .map_err(|error| fail(format!("cannot be read: {error}"), "cannot be read"))?;
        let table = CostTable::from_text(&text).map_err(|error| {
            fail(
                format!("is not a calibration file: {error}"),
                "not a calibration file",
            )
        })?;
        Ok((Some(path), table))
    }

    /// `planning.fp8_cast`.
    pub(super) fn fp8_cast(&self, section: &schema::PlanningSection) -> Result<Fp8Cast, Issue> {
        match &section.fp8_cast {
            Some(field) => self.choice(
                "planning.fp8_cast",
                field,
                &[
                    ("producer", Fp8Cast::Producer),
                    ("product", Fp8Cast::Product),
                ],
            ),
            None => Ok(Fp8Cast::Producer),
        }
    }

    /// `planning.matrix_inputs` and `planning.activation_scale`.
    pub(super) fn matrix_inputs(
        &self,
        section: &schema::PlanningSection,
    ) -> Result<ProductInputs, Issue> {
        #[derive(Clone, Copy)]
        enum Inputs {
            Fp16,
            Fp8,
        }
        let inputs = match &section.matrix_inputs {
            Some(field) => self.choice(
                "planning.matrix_inputs",
                field,
                &[("fp16", Inputs::Fp16), ("fp8", Inputs::Fp8)],
            )?,
            None => Inputs::Fp16,
        };
        let activation_scale = match &section.activation_scale {
            Some(field) => self.integer(
                "planning.activation_scale",
                field,
                *FP8_SCALE_RANGE.start(),
                *FP8_SCALE_RANGE.end(),
                "FP8 activations are stored as value x 2^-activation_scale in F143 (largest \
                 magnitude 240 x 2^activation_scale); -4 suits activations below 15",
            )? as i8,
            None => DEFAULT_ACTIVATION_SCALE,
        };
        Ok(match inputs {
            Inputs::Fp16 => ProductInputs::Fp16,
            Inputs::Fp8 => ProductInputs::Fp8 { activation_scale },
        })
    }
}
