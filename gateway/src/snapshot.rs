//! An immutable, versioned view of the configuration that workers read.

use std::sync::Arc;

use gateway_config::Config;

use crate::route::RouteTable;

pub struct Snapshot {
    /// 1 for the first config, +1 for every applied reload.
    pub version: u64,
    pub config: Arc<Config>,
    pub routes: RouteTable,
}

impl Snapshot {
    pub fn new(version: u64, config: Config) -> Self {
        let routes = RouteTable::new(&config);
        Self { version, config: Arc::new(config), routes }
    }
}
