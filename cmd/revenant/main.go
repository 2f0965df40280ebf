package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is set by the build (-ldflags "-X main.version=…").
var version = "dev"

// errUsage marks a command-line mistake: exit code 2. Such errors are
// usageErrors, which match it with errors.Is but print only their message.
var errUsage = errors.New("usage")

// usageError is a command-line mistake: its message, and errors.Is(err,
// errUsage).
type usageError struct{ msg string }

func (e usageError) Error() string        { return e.msg }
func (e usageError) Is(target error) bool { return target == errUsage }

// usagef is a usageError whose message is formatted as by fmt.Sprintf.
func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// commands are the subcommands, in the order help lists them.
var commands = []struct{ name, summary string }{
	{"serve", "serve the HTTP API on REVENANT_ADDR (the default command)"},
	{"simulate", "run the seeded eviction simulator and its checker (make simulate)"},
	{"version", "print the version"},
	{"help", "print this help, or a command's: revenant help <command>"},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "revenant:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "revenant:", err)
		os.Exit(1)
	}
}

// run runs the command args name (serve when the first argument is a flag
// or there is none). Help goes to stdout: asked for, it is not an error.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && isHelpFlag(args[0]) {
		return help(ctx, nil, stdout)
	}
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, os.Getenv, stdout)
	case "simulate":
		return simulate(ctx, args, os.Getenv, stdout)
	case "version":
		return printVersion(args, stdout)
	case "help":
		return help(ctx, args, stdout)
	}
	return usagef("unknown command %q (want %s; revenant help lists them)", cmd, commandNames())
}

// help prints the commands and the default command's flags, or with one
// argument that command's usage: each command prints its own when given -h.
func help(ctx context.Context, args []string, stdout io.Writer) error {
	switch len(args) {
	case 0:
	case 1:
		if args[0] == "help" {
			return help(ctx, nil, stdout)
		}
		for _, c := range commands {
			if c.name == args[0] {
				return run(ctx, []string{args[0], "-h"}, stdout)
			}
		}
		return usagef("help: unknown command %q (want %s)", args[0], commandNames())
	default:
		return usagef("help: give at most one command")
	}
	fmt.Fprintln(stdout, "revenant: durable AI-agent sessions.")
	fmt.Fprintln(stdout, "\nusage: revenant [command] [flags]")
	fmt.Fprintln(stdout, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(stdout, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(stdout, "\n'revenant <command> -h' prints a command's flags. Without a command, revenant serves:")
	fmt.Fprintln(stdout)
	return serve(ctx, []string{"-h"}, os.Getenv, stdout)
}

func isHelpFlag(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

func printVersion(args []string, stdout io.Writer) error {
	fs := newFlagSet("version", "", "Prints the version.")
	if done, err := parseFlags(fs, args, stdout); done || err != nil {
		return err
	}
	fmt.Fprintln(stdout, "revenant", version)
	return nil
}

// newFlagSet returns a command's flag set, quiet: parseFlags reports its
// errors and prints its usage. synopsis follows the command's name on the
// usage line; about is the paragraph under it.
func newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: revenant %s%s\n\n%s\n", name, synopsis, about)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args into fs. done reports that it printed the usage
// because it was asked for (-h): the command then stops, successfully.
// Anything left after the flags is a usage error.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (done bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return true, nil
		}
		return false, usagef("%s: %v (revenant %s -h lists the flags)", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return false, usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return false, nil
}
