use capability::Capability;

#[derive(Capability)]
#[capability(read_only, scopes = [metrics_read])]
struct PromQuery;

fn main() {}
