use capability::Capability;

#[derive(Capability)]
#[capability(read_only)]
struct RésuméSearch;

fn main() {}
