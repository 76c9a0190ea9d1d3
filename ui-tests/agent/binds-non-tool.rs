use capability::agent;

struct RestartPod;

#[agent(tools(RestartPod))]
struct Operator;

fn main() {}
