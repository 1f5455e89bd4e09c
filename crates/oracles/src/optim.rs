//! PLACEHOLDER: L-BFGS with a line search (see issue 3).
