// Command revenant runs revenant's local server and its tools.
//
//	revenant [serve]     serve the HTTP API on REVENANT_ADDR (the default)
//	revenant simulate    the seeded eviction simulator and its checker (make simulate)
//	revenant version     print the version
//	revenant help [cmd]  the commands, or one command's flags (also -h)
//
// The server keeps one SQLite file per tree under REVENANT_DATA and drives
// turns with the offline model unless a provider is configured. It is the
// host that `make run` starts and that the e2e tests kill with SIGKILL.
//
// One file per subcommand; exit codes are decided in main only.
package main
