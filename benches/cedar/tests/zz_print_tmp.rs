#[test]
fn print() {
    let f = capability_cedar_bench::Fixture::load();
    println!("{}", f.per_role.source);
    for a in f.check_agreement().unwrap() { if !a.decide && a.role=="operator" { println!("operator denied {}", a.tool); } }
}
