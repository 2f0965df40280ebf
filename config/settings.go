package config

import (
	"encoding/json"
	"errors"
	"math"

	"github.com/revenantrt/revenant/core/settings"
)

// settings reads the "settings" section: every field of settings.Settings
// by its name (settings.Fields), durations as Go duration strings and the
// rest as integers. A key left out takes the default, so a value given is
// taken literally: it must be positive, and 0 means zero (settings.None)
// where zero means something (resume_budget, model_retries).
func (d *decoder) settings(key string, raw json.RawMessage) settings.Settings {
	var s settings.Settings
	fields := s.Fields()
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	o := d.object(key, raw, names...)
	if o == nil {
		return s
	}
	bad := len(d.errs)
	for _, f := range fields {
		raw, k, ok := o.field(f.Name)
		if !ok {
			continue
		}
		switch {
		case f.Duration != nil:
			*f.Duration = d.positiveDuration(k, raw)
		case f.Int != nil:
			*f.Int = int(d.count(k, raw, f.NoneAllowed, math.MaxInt32))
		case f.Int64 != nil:
			*f.Int64 = d.count(k, raw, false, math.MaxInt64)
		}
	}
	if len(d.errs) > bad {
		return s // Validate would repeat what is already reported
	}
	var fieldErr *settings.FieldError
	for _, err := range unjoin(s.Validate()) {
		if errors.As(err, &fieldErr) {
			d.fail(member(key, fieldErr.Field), "%s", fieldErr.Msg)
		} else {
			d.fail(key, "%v", err)
		}
	}
	return s
}

// count reads an integer from 1 to max, or 0 where zero is allowed, which
// it returns as settings.None.
func (d *decoder) count(key string, raw json.RawMessage, zeroAllowed bool, max int64) int64 {
	n, ok := d.integer(key, raw)
	switch {
	case !ok:
		return 0
	case n == 0 && zeroAllowed:
		return settings.None
	case n < 1 && zeroAllowed:
		d.fail(key, "must be 0 or more")
	case n < 1:
		d.fail(key, "must be at least 1; leave the key out for the default")
	case n > max:
		d.fail(key, "must be at most %d", max)
	}
	return n
}

// unjoin lists the errors errors.Join joined (nil: none).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}
