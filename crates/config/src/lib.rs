//! Policy files. (Being written: see helper task.)
