use capability::Capability;

#[derive(Capability)]
#[capability(read_only, scopes = ["metrics:read", ""])]
struct PromQuery;

fn main() {}
