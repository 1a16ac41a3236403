//! Resolution of the keys the kernel cost model reads: `machine.calibration`
//! (a calibration file, read through the one input rule) and
//! `planning.matrix_inputs` with `planning.activation_scale` and
//! `workload.calibration` (what the matrix unit multiplies, and the input
//! that calibrates the FP8 activations' scales).

use std::path::Path;

use toml::Spanned;

use super::keys::*;
use super::{FP8_SCALE_RANGE, Resolver};
use crate::build_file::error::{Issue, Origin};
use crate::build_file::schema::{self, QueryFile, ScaleSetting};
use crate::build_file::{ActivationScale, CalibrationInput, Workload};
use crate::layout::fp8_activations::Fp8Cast;
use crate::target::kernel_cost::{CostTable, MatrixInputs};

impl Resolver<'_> {
    /// `machine.calibration`: the calibration file read whole (a regular
    /// file of at most 1 MiB) and parsed; `None`: the shipped table.
    pub(super) fn calibration(
        &self,
        file: &QueryFile,
        base_dir: Option<&Path>,
    ) -> Result<(Option<std::path::PathBuf>, CostTable), Issue> {
        const PATH: &str = MACHINE_CALIBRATION;
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

    /// `planning.matrix_inputs`: what every product multiplies.
    pub(super) fn matrix_inputs(
        &self,
        section: &schema::PlanningSection,
    ) -> Result<MatrixInputs, Issue> {
        match &section.matrix_inputs {
            Some(field) => self.choice(
                PLANNING_MATRIX_INPUTS,
                field,
                &[("fp16", MatrixInputs::Fp16), ("fp8", MatrixInputs::Fp8)],
            ),
            None => Ok(MatrixInputs::Fp8),
        }
    }

    /// `[planning.matrix_inputs_by_op]` and then `--set
    /// planning.matrix_inputs.OP=fp8|fp16` (which win over the file's entry
    /// for their op): each names a matrix product of the workload's graph
    /// and a precision.
    pub(super) fn matrix_input_overrides(
        &self,
        section: &schema::PlanningSection,
        workload: &Workload,
    ) -> Result<std::collections::BTreeMap<String, MatrixInputs>, Issue> {
        let mut overrides = std::collections::BTreeMap::new();
        if section.matrix_inputs_by_op.is_empty() && section.matrix_input_overrides.is_empty() {
            return Ok(overrides);
        }
        let graph = crate::model::builder::build_graph(
            &workload.model,
            crate::model::builder::GraphKnobs {
                batch: workload.batch,
                fuse_qkv: workload.fuse_qkv,
            },
        );
        let products = graph.product_names();
        const TABLE: &str = PLANNING_MATRIX_INPUTS_BY_OP;
        for (op, value) in &section.matrix_inputs_by_op {
            let key = format!("{TABLE}.\"{}\"", op.get_ref());
            let name = Named {
                key: &key,
                op: op.get_ref(),
                op_origin: Origin::File(op.span()),
                value: value.get_ref(),
                value_origin: Origin::File(value.span()),
            };
            let inputs = name.resolve(&products, &workload.model.name)?;
            overrides.insert(op.get_ref().clone(), inputs);
        }
        for (op, value, argument) in &section.matrix_input_overrides {
            let key = format!("planning.matrix_inputs.{op}");
            let name = Named {
                key: &key,
                op,
                op_origin: Origin::Set(argument.clone()),
                value: value.trim_matches('"'),
                value_origin: Origin::Set(argument.clone()),
            };
            let inputs = name.resolve(&products, &workload.model.name)?;
            overrides.insert(op.clone(), inputs);
        }
        Ok(overrides)
    }

    /// `planning.activation_scale` (an exponent, or `"calibrate"` on
    /// `workload.calibration`).
    pub(super) fn activation_scale(
        &self,
        file: &QueryFile,
        base_dir: Option<&Path>,
    ) -> Result<ActivationScale, Issue> {
        const PATH: &str = PLANNING_ACTIVATION_SCALE;
        let Some(field) = &file.planning.activation_scale else {
            return Ok(ActivationScale::Calibrate {
                input: self.calibration_input(file, base_dir)?,
            });
        };
        match field.get_ref() {
            ScaleSetting::Exponent(exponent) => {
                let exponent = Spanned::new(field.span(), *exponent);
                let scale = self.integer(
                    PATH,
                    &exponent,
                    *FP8_SCALE_RANGE.start(),
                    *FP8_SCALE_RANGE.end(),
                    "FP8 activations are stored as value x 2^-activation_scale in F143 (largest \
                     magnitude 240 x 2^activation_scale); -4 suits activations below 15, and \
                     \"calibrate\" chooses one per product from the FP32 reference",
                )?;
                // In range, so it fits 8 bits.
                Ok(ActivationScale::Fixed(scale as i8))
            }
            ScaleSetting::Word(word) if word == "calibrate" => Ok(ActivationScale::Calibrate {
                input: self.calibration_input(file, base_dir)?,
            }),
            ScaleSetting::Word(word) => Err(Issue::new(
                PATH,
                self.origin(PATH, field),
                format!("{PATH} = \"{word}\" is neither an integer exponent nor \"calibrate\""),
            )
            .label("not a scale")
            .help(
                "write activation_scale = \"calibrate\" (a scale per product, from the FP32 \
                 reference on workload.calibration) or an exponent from -32 to 32 for every \
                 product (e.g. -4)",
            )),
        }
    }

    /// `workload.calibration`: the seeded input, or the patches of the photo
    /// or `.npy` array it names (one photo serves every image of a batch).
    fn calibration_input(
        &self,
        file: &QueryFile,
        base_dir: Option<&Path>,
    ) -> Result<CalibrationInput, Issue> {
        const PATH: &str = WORKLOAD_CALIBRATION;
        let field = file
            .workload
            .as_ref()
            .and_then(|section| section.get_ref().calibration.as_ref());
        let Some(field) = field else {
            return Ok(CalibrationInput::Seeded);
        };
        let written = field.get_ref();
        let origin = self.origin(PATH, field);
        let path = match (&origin, base_dir) {
            (Origin::File(_), Some(base)) => base.join(written),
            _ => std::path::PathBuf::from(written),
        };
        if !path.is_file() {
            return Err(Issue::new(
                PATH,
                origin,
                format!("{PATH} = \"{written}\": `{}` is not a file", path.display()),
            )
            .label("not a file")
            .help(
                "name a PNG or JPEG photo or a .npy array of the model's pixels or patches; \
                 paths in the build file are relative to the build file's folder",
            ));
        }
        Ok(CalibrationInput::File { path })
    }
}

/// One per-product inputs entry as written: in the build file's table or
/// by `--set`.
struct Named<'a> {
    /// The key as the user would name it in a message.
    key: &'a str,
    op: &'a str,
    op_origin: Origin,
    value: &'a str,
    value_origin: Origin,
}

impl Named<'_> {
    /// The precision the entry names, when its op is one of `products`
    /// (the model's, `model` its name).
    fn resolve(&self, products: &[String], model: &str) -> Result<MatrixInputs, Issue> {
        let key = self.key;
        if !products.iter().any(|product| product == self.op) {
            let near = near_names(self.op, products);
            let help = if near.is_empty() {
                String::from(
                    "name a product as `superstep build --ops` prints its op, e.g. layer.mlp.down",
                )
            } else {
                format!("did you mean {}?", near.join(" or "))
            };
            return Err(Issue::new(
                key.to_string(),
                self.op_origin.clone(),
                format!(
                    "{key}: `{}` is not a matrix product or attention of {model}; its products are {}",
                    self.op,
                    products.join(", ")
                ),
            )
            .label("not a product")
            .help(help));
        }
        match self.value {
            "fp8" => Ok(MatrixInputs::Fp8),
            "fp16" => Ok(MatrixInputs::Fp16),
            other => Err(Issue::new(
                key.to_string(),
                self.value_origin.clone(),
                format!("{key} = \"{other}\" is neither \"fp8\" nor \"fp16\""),
            )
            .label("not a precision")
            .help("write fp8 or fp16")),
        }
    }
}

/// The products nearest in spelling to `op` (at most three, closest first,
/// each within a third of its length), quoted for a message.
fn near_names(op: &str, products: &[String]) -> Vec<String> {
    let mut near: Vec<(usize, &String)> = products
        .iter()
        .map(|product| (crate::text::edit_distance(product, op), product))
        .filter(|(distance, product)| *distance <= (product.len() / 3).max(1))
        .collect();
    near.sort();
    near.into_iter()
        .take(3)
        .map(|(_, product)| format!("`{product}`"))
        .collect()
}
