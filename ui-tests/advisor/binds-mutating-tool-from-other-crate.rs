use capability::advisor_agent;

#[advisor_agent(tools(toolkit::ListUsers, toolkit::DeleteUser), target = "selection")]
struct Picker;

fn main() {}
