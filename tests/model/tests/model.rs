//! The protocol's properties (`protocol`) and its negative controls (`controls`), each an
//! independent test of one binary, so that a failing one keeps none of the others from
//! running.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod controls;
mod protocol;
