use capability::advisor_agent;

#[advisor_agent(target = "research")]
struct Analyst;

fn main() {}
