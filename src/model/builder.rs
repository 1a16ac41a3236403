//! Builds the shaped SSA graph of a ViT-family encoder from a model
//! configuration: patch embedding, a `Repeat` of identical pre-norm layers
//! with iterated per-layer weights, a final norm and the pooling head.
//!
//! Owns op and value naming (the stable name paths later stages key on). It
//! does not choose layouts or precision of accumulation.

use super::config::{GeluForm, ModelConfig, Pooling, Positions};
use super::graph::{
    GeluKind, Graph, OpKind, Precision, Region, RepeatInfo, RowPiece, Shape, ValueId, ValueKind,
    ViewKind,
};

/// Workload knobs that change the graph's structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphKnobs {
    pub batch: u32,
    pub fuse_qkv: bool,
}

struct Builder<'config> {
    graph: Graph,
    config: &'config ModelConfig,
    knobs: GraphKnobs,
}

impl Builder<'_> {
    fn weight(
        &mut self,
        name: &str,
        rows: u32,
        cols: u32,
        precision: Precision,
        region: Region,
    ) -> ValueId {
        let iterated = region == Region::Body;
        self.graph.add_value(
            name,
            Shape::matrix(rows, cols),
            precision,
            ValueKind::Weight { iterated },
            region,
        )
    }

    /// `x * W + b` with an FP8 weight and an FP16 bias.
    fn linear(&mut self, name: &str, x: ValueId, out_cols: u32, region: Region) -> ValueId {
        let in_shape = self.graph.value(x).shape;
        let weight = self.weight(
            &format!("{name}.weight"),
            in_shape.cols,
            out_cols,
            Precision::F8,
            region,
        );
        let bias = self.weight(&format!("{name}.bias"), 1, out_cols, Precision::F16, region);
        self.graph.add_op(
            name,
            OpKind::MatMul { bias: true },
            vec![x, weight, bias],
            Shape::matrix(in_shape.rows, out_cols),
            Precision::F16,
            region,
        )
    }

    fn layer_norm(&mut self, name: &str, x: ValueId, region: Region) -> ValueId {
        let shape = self.graph.value(x).shape;
        let gamma = self.weight(
            &format!("{name}.gamma"),
            1,
            shape.cols,
            Precision::F16,
            region,
        );
        let beta = self.weight(
            &format!("{name}.beta"),
            1,
            shape.cols,
            Precision::F16,
            region,
        );
        self.graph.add_op(
            name,
            OpKind::LayerNorm {
                epsilon: self.config.layer_norm_epsilon,
            },
            vec![x, gamma, beta],
            shape,
            Precision::F16,
            region,
        )
    }

    fn add(&mut self, name: &str, a: ValueId, b: ValueId, region: Region) -> ValueId {
        let shape = self.graph.value(a).shape;
        self.graph
            .add_op(name, OpKind::Add, vec![a, b], shape, Precision::F16, region)
    }

    fn gelu(&mut self, name: &str, x: ValueId, region: Region) -> ValueId {
        let shape = self.graph.value(x).shape;
        let kind = match self.config.gelu {
            GeluForm::Tanh => GeluKind::Tanh,
            GeluForm::Erf => GeluKind::Erf,
        };
        self.graph.add_op(
            name,
            OpKind::Gelu { kind },
            vec![x],
            shape,
            Precision::F16,
            region,
        )
    }

    fn view(
        &mut self,
        name: &str,
        kind: ViewKind,
        inputs: Vec<ValueId>,
        shape: Shape,
        region: Region,
    ) -> ValueId {
        self.graph.add_op(
            name,
            OpKind::View(kind),
            inputs,
            shape,
            Precision::F16,
            region,
        )
    }

    fn split_heads(
        &mut self,
        name: &str,
        x: ValueId,
        heads: u32,
        tokens: u32,
        column_offset: u32,
        region: Region,
    ) -> ValueId {
        let width = self.config.width;
        let head_dim = width / heads;
        let rows = self.graph.value(x).shape.rows;
        let images = rows / tokens;
        self.view(
            name,
            ViewKind::SplitHeads {
                heads,
                head_dim,
                tokens,
                column_offset,
            },
            vec![x],
            Shape {
                groups: images * heads,
                rows: tokens,
                cols: head_dim,
            },
            region,
        )
    }

    fn merge_heads(&mut self, name: &str, x: ValueId, heads: u32, region: Region) -> ValueId {
        let shape = self.graph.value(x).shape;
        let images = shape.groups / heads;
        self.view(
            name,
            ViewKind::MergeHeads {
                heads,
                head_dim: shape.cols,
                tokens: shape.rows,
            },
            vec![x],
            Shape::matrix(images * shape.rows, heads * shape.cols),
            region,
        )
    }

    fn attention(
        &mut self,
        name: &str,
        q: ValueId,
        k: ValueId,
        v: ValueId,
        region: Region,
    ) -> ValueId {
        let shape = self.graph.value(q).shape;
        let scale = 1.0 / (shape.cols as f32).sqrt();
        self.graph.add_op(
            name,
            OpKind::Attention { scale },
            vec![q, k, v],
            shape,
            Precision::F16,
            region,
        )
    }

    fn mlp(&mut self, prefix: &str, x: ValueId, region: Region) -> ValueId {
        let up = self.linear(&format!("{prefix}.up"), x, self.config.mlp, region);
        let activated = self.gelu(&format!("{prefix}.gelu"), up, region);
        self.linear(
            &format!("{prefix}.down"),
            activated,
            self.config.width,
            region,
        )
    }

    fn embedding(&mut self) -> ValueId {
        let config = self.config;
        let region = Region::Prologue;
        let images = self.knobs.batch;
        let patch_values = config.channels * config.patch * config.patch;
        let patches = self.graph.add_value(
            "input.patches",
            Shape::matrix(images * config.patches, patch_values),
            Precision::F16,
            ValueKind::Input,
            region,
        );
        let mut x = self.linear("embed.patch", patches, config.width, region);
        let tokens = config.tokens();
        if config.class_token {
            let class = self.weight("embed.class_token", 1, config.width, Precision::F16, region);
            let mut pieces = Vec::new();
            for image in 0..images {
                pieces.push(RowPiece {
                    input: 1,
                    first_row: 0,
                    rows: 1,
                });
                pieces.push(RowPiece {
                    input: 0,
                    first_row: image * config.patches,
                    rows: config.patches,
                });
            }
            x = self.view(
                "embed.concat_class",
                ViewKind::Rows { pieces },
                vec![x, class],
                Shape::matrix(images * tokens, config.width),
                region,
            );
        }
        let mut positions = self.weight(
            "embed.positions",
            tokens,
            config.width,
            Precision::F16,
            region,
        );
        if images > 1 {
            let pieces = (0..images)
                .map(|_| RowPiece {
                    input: 0,
                    first_row: 0,
                    rows: tokens,
                })
                .collect();
            positions = self.view(
                "embed.broadcast_positions",
                ViewKind::Rows { pieces },
                vec![positions],
                Shape::matrix(images * tokens, config.width),
                region,
            );
        }
        x = self.add("embed.add_positions", x, positions, region);
        if config.pre_norm {
            x = self.layer_norm("embed.ln_pre", x, region);
        }
        x
    }

    fn layer(&mut self, x: ValueId) -> ValueId {
        let config = self.config;
        let region = Region::Body;
        let width = config.width;
        let heads = config.heads;
        let tokens = config.tokens();
        let normed = self.layer_norm("layer.ln1", x, region);
        let (mut q, mut k, v) = if self.knobs.fuse_qkv {
            let qkv = self.linear("layer.attn.qkv", normed, 3 * width, region);
            (
                self.split_heads("layer.attn.split_q", qkv, heads, tokens, 0, region),
                self.split_heads("layer.attn.split_k", qkv, heads, tokens, width, region),
                self.split_heads("layer.attn.split_v", qkv, heads, tokens, 2 * width, region),
            )
        } else {
            let q = self.linear("layer.attn.q", normed, width, region);
            let k = self.linear("layer.attn.k", normed, width, region);
            let v = self.linear("layer.attn.v", normed, width, region);
            (
                self.split_heads("layer.attn.split_q", q, heads, tokens, 0, region),
                self.split_heads("layer.attn.split_k", k, heads, tokens, 0, region),
                self.split_heads("layer.attn.split_v", v, heads, tokens, 0, region),
            )
        };
        if config.positions == Positions::LearnedWithRotary {
            let grid = integer_square_root(config.patches);
            let rotary = OpKind::Rotary {
                grid,
                class_token: config.class_token,
            };
            let q_shape = self.graph.value(q).shape;
            q = self.graph.add_op(
                "layer.attn.rotary_q",
                rotary.clone(),
                vec![q],
                q_shape,
                Precision::F16,
                region,
            );
            k = self.graph.add_op(
                "layer.attn.rotary_k",
                rotary,
                vec![k],
                q_shape,
                Precision::F16,
                region,
            );
        }
        let attended = self.attention("layer.attn.core", q, k, v, region);
        let merged = self.merge_heads("layer.attn.merge", attended, heads, region);
        let projected = self.linear("layer.attn.out", merged, width, region);
        let h = self.add("layer.attn.residual", x, projected, region);
        let normed = self.layer_norm("layer.ln2", h, region);
        let mlp = self.mlp("layer.mlp", normed, region);
        self.add("layer.mlp.residual", h, mlp, region)
    }

    /// Probe cross-attention pooling (SigLIP's MAP head, PE's attention
    /// pooling): one learned probe attends over the tokens of each image,
    /// then `x + MLP(LN(x))`.
    fn probe_pool(&mut self, x: ValueId, heads: u32) -> ValueId {
        let config = self.config;
        let region = Region::Epilogue;
        let width = config.width;
        let images = self.knobs.batch;
        let tokens = config.tokens();
        let probe = self.weight("head.probe", 1, width, Precision::F16, region);
        let query = self.linear("head.pool.q", probe, width, region);
        let pieces = (0..images)
            .map(|_| RowPiece {
                input: 0,
                first_row: 0,
                rows: 1,
            })
            .collect();
        let queries = self.view(
            "head.pool.broadcast_q",
            ViewKind::Rows { pieces },
            vec![query],
            Shape::matrix(images, width),
            region,
        );
        let keys = self.linear("head.pool.k", x, width, region);
        let values = self.linear("head.pool.v", x, width, region);
        let q = self.split_heads("head.pool.split_q", queries, heads, 1, 0, region);
        let k = self.split_heads("head.pool.split_k", keys, heads, tokens, 0, region);
        let v = self.split_heads("head.pool.split_v", values, heads, tokens, 0, region);
        let attended = self.attention("head.pool.core", q, k, v, region);
        let merged = self.merge_heads("head.pool.merge", attended, heads, region);
        let pooled = self.linear("head.pool.out", merged, width, region);
        let normed = self.layer_norm("head.pool.ln", pooled, region);
        let mlp = self.mlp("head.pool.mlp", normed, region);
        self.add("head.pool.residual", pooled, mlp, region)
    }

    fn head(&mut self, x: ValueId) -> ValueId {
        let config = self.config;
        let region = Region::Epilogue;
        let normed = self.layer_norm("head.norm", x, region);
        let mut pooled = match config.pooling {
            Pooling::Map { heads } | Pooling::AttentionPool { heads } => {
                self.probe_pool(normed, heads)
            }
            Pooling::ClassToken => {
                let tokens = config.tokens();
                let pieces = (0..self.knobs.batch)
                    .map(|image| RowPiece {
                        input: 0,
                        first_row: image * tokens,
                        rows: 1,
                    })
                    .collect();
                self.view(
                    "head.select_class",
                    ViewKind::Rows { pieces },
                    vec![normed],
                    Shape::matrix(self.knobs.batch, config.width),
                    region,
                )
            }
        };
        if let Some(projection) = config.projection {
            pooled = self.linear("head.projection", pooled, projection, region);
        }
        let shape = self.graph.value(pooled).shape;
        self.graph.add_op(
            "head.output",
            OpKind::Cast,
            vec![pooled],
            shape,
            Precision::F32,
            region,
        )
    }
}

fn integer_square_root(value: u32) -> u32 {
    let mut root = (value as f64).sqrt() as u32;
    while root * root > value {
        root -= 1;
    }
    while (root + 1) * (root + 1) <= value {
        root += 1;
    }
    root
}

/// Builds the graph. The configuration must already be validated (the build
/// query's validator guarantees heads divide the width, non-zero sizes).
pub fn build_graph(config: &ModelConfig, knobs: GraphKnobs) -> Graph {
    let mut builder = Builder {
        graph: Graph::default(),
        config,
        knobs,
    };
    let x = builder.embedding();
    let output = if config.layers > 0 {
        let carried_input = builder.graph.add_value(
            "layer.input",
            builder.graph.value(x).shape,
            Precision::F16,
            ValueKind::Activation,
            Region::Body,
        );
        let carried_output = builder.layer(carried_input);
        builder.graph.repeat = Some(RepeatInfo {
            iterations: config.layers,
            initial: x,
            carried_input,
            carried_output,
        });
        // After the loop the carried slot holds the last layer's result.
        builder.head(carried_input)
    } else {
        builder.head(x)
    };
    builder.graph.output = Some(output);
    builder.graph
}
