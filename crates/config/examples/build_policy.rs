//! Parse, check and build a policy file, both directions, timing each step: how the
//! subscriber-scale figures of docs/import.md are measured.
//!
//! `cargo run --release -p linkshare-config --example build_policy -- POLICY`

use std::time::Instant;

use linkshare_config::{Driver, Policy};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: build_policy POLICY");
        std::process::exit(2);
    };
    let t0 = Instant::now();
    let p = match Policy::load(std::path::Path::new(&path)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let t1 = Instant::now();
    let built = p.build_directions::<linkshare_core::PacketMeta>(&Driver::default());
    let t2 = Instant::now();
    match built {
        Ok((down, up)) => {
            println!(
                "{} classes, {} filters: parse+check {:.3} s, build {:.3} s (upload side: {})",
                p.classes().len(),
                p.filters().len(),
                (t1 - t0).as_secs_f64(),
                (t2 - t1).as_secs_f64(),
                up.is_some()
            );
            drop((down, up));
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
