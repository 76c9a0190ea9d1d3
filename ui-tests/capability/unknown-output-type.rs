use capability::Capability;

#[derive(Capability)]
#[capability(read_only, output = PodLsit)]
struct ListPods;

struct PodList;

fn main() {}
