use capability::Capability;

/// Log in.
#[derive(Capability)]
#[capability(destructive = false, sensitive = ["0"])]
struct Login(String, String);

fn main() {}
