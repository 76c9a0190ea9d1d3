use capability::Capability;

#[derive(Capability)]
#[capability(
    read_only,
    name = "a_tool_name_that_goes_on_and_on_well_past_the_one_hundred_and_twenty_eight_characters_that_the_mcp_specification_allows_for_any_tool"
)]
struct ListPods;

fn main() {}
