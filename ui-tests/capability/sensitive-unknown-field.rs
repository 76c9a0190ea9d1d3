use capability::Capability;

/// Log in.
#[derive(Capability)]
#[capability(destructive = false, sensitive = ["pasword"])]
struct Login {
    user: String,
    password: String,
}

fn main() {}
