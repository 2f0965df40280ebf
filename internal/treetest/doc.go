// Package treetest is the test harness for a tree on a real SQLite file:
// boot an instance over it with fake host parts, kill it at any commit the
// way SIGKILL would, boot the next one over the same file, and read what
// survived. It also has Driver, a scriptable stand-in for the turn runner.
//
// For storage faults (DESIGN §8), Faults opens the tree's later connections
// through internal/faultvfs, and Drive moves the fake clock through every
// wait for storage as it is announced, so a 15-minute outage takes
// milliseconds and no test sleeps.
//
// Only tests import it.
package treetest
