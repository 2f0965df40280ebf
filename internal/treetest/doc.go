// Package treetest is the test harness for a tree on a real SQLite file:
// boot an instance over it with fake host parts, kill it at any commit the
// way SIGKILL would, boot the next one over the same file, and read what
// survived. It also has Driver, a scriptable stand-in for the turn runner.
//
// Only tests import it.
package treetest
