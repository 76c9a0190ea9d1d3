use capability::advisor_agent;

struct PromQuery;

#[advisor_agent(tools(PromQuery))]
struct Analyst;

fn main() {}
