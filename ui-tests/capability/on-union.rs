use capability::Capability;

#[derive(Capability)]
#[capability(read_only)]
union Raw {
    int: u32,
    float: f32,
}

fn main() {}
