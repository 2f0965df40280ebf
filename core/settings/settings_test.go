package settings_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/core/tool"
)

// The zero Settings is every builder's defaults.
func TestZeroIsDefaults(t *testing.T) {
	c, err := settings.Settings{}.Configs()
	require.NoError(t, err)
	require.Equal(t, core.NewConfig(), c.Core)
	require.Equal(t, runner.NewConfig(), c.Runner)
	require.Equal(t, api.NewConfig(), c.API)
}

// Every field reaches its builder's With method.
func TestFieldsMapOntoBuilders(t *testing.T) {
	s := settings.Settings{
		ResumeBudget: 3, MaxClaimAge: time.Hour, WakeInterval: 2 * time.Second, InterruptGrace: time.Second, QueueCap: 4,
		StepCap: 7, StreamIdle: 5 * time.Second, StepWall: time.Minute, ToolTimeout: 30 * time.Second, ToolOutputCap: 100,
		CheckpointEvery: 3 * time.Second, CheckpointBytes: 64, ModelRetries: 2, RetryInitial: 2 * time.Second,
		RetryMax: 4 * time.Second, ContextBytes: 1000, MaxSubagents: 9, MaxRetryAfter: time.Second,
		Heartbeat: 3 * time.Second, MaxBody: 512, SessionPageSize: 10, MessagePageSize: 20,
	}
	c, err := s.Configs()
	require.NoError(t, err)
	require.Equal(t, core.NewConfig().WithResumeBudget(3).WithMaxClaimAge(time.Hour).WithWakeInterval(2*time.Second).
		WithInterruptGrace(time.Second).WithQueueCap(4), c.Core)
	require.Equal(t, runner.NewConfig().WithStepCap(7).WithStreamIdle(5*time.Second).WithStepWall(time.Minute).
		WithToolTimeout(30*time.Second).WithOutputCap(100).WithCheckpoints(3*time.Second, 64).
		WithRetries(2, 2*time.Second, 4*time.Second).WithContextBytes(1000).WithMaxSubagents(9), c.Runner)
	require.Equal(t, api.NewConfig().WithHeartbeat(3*time.Second).WithMaxBody(512).WithPageSizes(10, 20), c.API)
}

// One half of a pair takes its default for the other half.
func TestPairsFillTheOtherHalf(t *testing.T) {
	c, err := settings.Settings{CheckpointBytes: 64, RetryMax: 2 * time.Minute}.Configs()
	require.NoError(t, err)
	require.Equal(t, runner.NewConfig().WithCheckpoints(runner.DefaultCheckpointEvery, 64).
		WithRetries(runner.DefaultRetries, runner.DefaultRetryInitial, 2*time.Minute), c.Runner)
}

// None is zero where zero means something.
func TestNoneIsZero(t *testing.T) {
	c, err := settings.Settings{ResumeBudget: settings.None, ModelRetries: settings.None, RetryInitial: time.Hour}.Configs()
	require.NoError(t, err, "with no retries, the delays do not matter")
	require.Equal(t, 0, c.Core.ResumeBudget())
	require.Equal(t, runner.NewConfig().WithRetries(0, time.Hour, runner.DefaultRetryMax), c.Runner)
	// Configs's builders are valid: the runner takes this one too.
	_, err = runner.New(offline.New(nil, offline.Options{}), tool.Registry{}, c.Runner)
	require.NoError(t, err)
}

// A duration under its floor is refused, naming the field, the floor and
// what the floor prevents: a timer firing without pause (the wake-up; a
// heartbeat of 1ns sent about 160 KB a second to one idle stream of the
// local server; a checkpoint at nearly every chunk), every step or tool
// call failing at once, a provider's failures retried back to back, an
// interrupt never waiting for the turn to record it, or every turn a sweep
// meets failed. (retry_max is checked with no retries, so that
// retry_initial's default, longer than it, is not refused too.) The floor
// itself is allowed, a millisecond
// less is not (plants57 P32, P50: a floor checked at half its value went
// unnoticed while only 1ns was tried).
func TestFloors(t *testing.T) {
	for _, tc := range []struct {
		set  func(*settings.Settings, time.Duration)
		min  time.Duration
		want string
	}{
		{func(s *settings.Settings, d time.Duration) { s.WakeInterval = d }, settings.MinWakeInterval,
			"wake_interval: 1ns is shorter than the least allowed, 100ms (the wake-up fires that often while a turn runs)"},
		{func(s *settings.Settings, d time.Duration) { s.StreamIdle = d }, settings.MinStreamIdle,
			"stream_idle: 1ns is shorter than the least allowed, 1s (a model stream silent that long fails its step)"},
		{func(s *settings.Settings, d time.Duration) { s.StepWall = d }, settings.MinStepWall,
			"step_wall: 1ns is shorter than the least allowed, 1s (a model step streaming that long fails)"},
		{func(s *settings.Settings, d time.Duration) { s.ToolTimeout = d }, settings.MinToolTimeout,
			"tool_timeout: 1ns is shorter than the least allowed, 100ms (a tool call running that long fails)"},
		{func(s *settings.Settings, d time.Duration) { s.CheckpointEvery = d }, settings.MinCheckpointEvery,
			"checkpoint_every: 1ns is shorter than the least allowed, 100ms (streamed text is written to storage that often)"},
		{func(s *settings.Settings, d time.Duration) { s.Heartbeat = d }, settings.MinHeartbeat,
			"heartbeat: 1ns is shorter than the least allowed, 100ms (every idle event stream is sent a comment that often)"},
		{func(s *settings.Settings, d time.Duration) { s.RetryInitial = d }, settings.MinRetryInitial,
			"retry_initial: 1ns is shorter than the least allowed, 100ms (a model request that failed is first retried after that long)"},
		{func(s *settings.Settings, d time.Duration) { s.RetryMax = d; s.ModelRetries = settings.None }, settings.MinRetryMax,
			"retry_max: 1ns is shorter than the least allowed, 100ms (the waits between retries of a model request are capped at that)"},
		{func(s *settings.Settings, d time.Duration) { s.MaxRetryAfter = d }, settings.MinMaxRetryAfter,
			"max_retry_after: 1ns is shorter than the least allowed, 1s (a provider's Retry-After, in whole seconds, is capped at that)"},
		{func(s *settings.Settings, d time.Duration) { s.InterruptGrace = d }, settings.MinInterruptGrace,
			"interrupt_grace: 1ns is shorter than the least allowed, 100ms (an interrupt waits that long for the turn to record it itself)"},
		{func(s *settings.Settings, d time.Duration) { s.MaxClaimAge = d }, settings.MinMaxClaimAge,
			"max_claim_age: 1ns is shorter than the least allowed, 1m0s (a turn that old fails instead of resuming)"},
	} {
		var s settings.Settings
		tc.set(&s, time.Nanosecond)
		require.EqualError(t, s.Validate(), tc.want)
		tc.set(&s, tc.min-time.Millisecond)
		require.Error(t, s.Validate(), "a millisecond under the floor: %s", tc.want)
		tc.set(&s, tc.min)
		require.NoError(t, s.Validate(), tc.want)
	}
}

// Validate names every bad field at once, by its file name.
func TestValidate(t *testing.T) {
	s := settings.Settings{
		ResumeBudget: -2, StepCap: -1, WakeInterval: -time.Second, MaxBody: -1, ModelRetries: settings.None - 1, MaxSubagents: -1,
		QueueCap: settings.MaxQueueCap + 1, SessionPageSize: api.MaxListLimit + 1, MessagePageSize: api.MaxMessageLimit + 1, RetryInitial: 2 * time.Minute,
	}
	err := s.Validate()
	require.Error(t, err)
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *settings.FieldError
		require.True(t, errors.As(e, &fe), "%v", e)
		fields = append(fields, fe.Field)
	}
	require.Equal(t, []string{"resume_budget", "wake_interval", "step_cap", "model_retries", "max_subagents", "max_body",
		"queue_cap", "session_page_size", "message_page_size", "retry_initial"}, fields)
	require.Contains(t, err.Error(), "retry_initial: 2m0s is longer than retry_max (1m0s)")
	require.Contains(t, err.Error(), "resume_budget: -2 is out of range: 0 or more, or -1 for none")
	require.Contains(t, err.Error(), "step_cap: -1 is negative")
	require.Contains(t, err.Error(), "max_subagents: -1 is negative")

	_, err = s.Configs()
	require.Error(t, err, "Configs validates")
	require.NoError(t, settings.Settings{SessionPageSize: api.MaxListLimit, MessagePageSize: api.MaxMessageLimit}.Validate())

	require.NoError(t, settings.Settings{MaxBody: settings.MaxMaxBody}.Validate())
	require.NoError(t, settings.Settings{RetryInitial: 5 * time.Second, RetryMax: 5 * time.Second}.Validate(),
		"a flat backoff: initial may equal max, as the runner allows")
	err = settings.Settings{MaxBody: settings.MaxMaxBody + 1}.Validate()
	require.EqualError(t, err, "max_body: 1073741825 is above the largest allowed, 1073741824 (1 GiB)")

	require.NoError(t, settings.Settings{QueueCap: settings.MaxQueueCap}.Validate())
	err = settings.Settings{QueueCap: settings.MaxQueueCap + 1}.Validate()
	require.EqualError(t, err, "queue_cap: 1001 is above the largest allowed, 1000 (a snapshot lists every prompt not ended, and an interrupt cancels them all in one transaction)")
}

// Fields names every field of Settings exactly once, in order: a reader
// that sets fields by name can set them all.
func TestFieldsCoverSettings(t *testing.T) {
	var s settings.Settings
	v := reflect.ValueOf(&s).Elem()
	fields := s.Fields()
	require.Len(t, fields, v.NumField())
	names := map[string]bool{}
	for i, f := range fields {
		var p any
		n := 0
		if f.Int != nil {
			p, n = f.Int, n+1
		}
		if f.Int64 != nil {
			p, n = f.Int64, n+1
		}
		if f.Duration != nil {
			p, n = f.Duration, n+1
		}
		require.Equal(t, 1, n, "%s points at one value", f.Name)
		require.Same(t, v.Field(i).Addr().Interface(), p, "%s is field %s", f.Name, v.Type().Field(i).Name)
		require.False(t, names[f.Name], "%s named twice", f.Name)
		names[f.Name] = true
	}
}

// The names are the configuration file's keys (README, docs/abi.md), and
// only the two counts where zero means something take None: a renamed key
// would refuse every file that sets it, and None on another count would
// pass -1 on to a builder.
func TestFieldNamesAreTheFileKeys(t *testing.T) {
	var s settings.Settings
	var names, none []string
	for _, f := range s.Fields() {
		names = append(names, f.Name)
		if f.NoneAllowed {
			none = append(none, f.Name)
		}
	}
	require.Equal(t, []string{"resume_budget", "max_claim_age", "wake_interval", "interrupt_grace", "queue_cap",
		"step_cap", "stream_idle", "step_wall", "tool_timeout", "tool_output_cap", "checkpoint_every", "checkpoint_bytes",
		"model_retries", "retry_initial", "retry_max", "context_bytes", "max_subagents", "max_retry_after",
		"heartbeat", "max_body", "session_page_size", "message_page_size"}, names)
	require.Equal(t, []string{"resume_budget", "model_retries"}, none)
}
