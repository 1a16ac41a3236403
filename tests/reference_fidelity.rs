//! superstep's FP32 reference against what the reference libraries compute
//! (`WORKLOADS.md`: each preset must compute what its library computes, to
//! FP32 rounding, on the same quantised weights). The expected outputs were
//! written once by the libraries themselves (`scripts/fixtures/`); these
//! tests need no Python. Also the checkpoint reader, whose tests compare
//! with the libraries' outputs the same way.
