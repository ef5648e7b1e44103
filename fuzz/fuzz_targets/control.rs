#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| linkshare_fuzzing::control::run(data));
