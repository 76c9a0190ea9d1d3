//! The `capability` command (being written).

fn main() {}
