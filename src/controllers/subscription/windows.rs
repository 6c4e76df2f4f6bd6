//! Maintenance windows (`spec.upgradePolicy.maintenanceWindows`): recurring spans in UTC
//! during which upgrades may be approved automatically.

use k8s_openapi::jiff::civil::{Date, Weekday};
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{SignedDuration, Timestamp, ToSpan};

use crate::api::MaintenanceWindow;

/// Why a window cannot be read; the caller names the window.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("day {0:?} is not one of Monday … Sunday (or Mon … Sun)")]
    Day(String),
    #[error("start {0:?} is not HH:MM (UTC)")]
    Start(String),
    #[error("duration {0:?} is not a duration such as 4h or 90m, from 1m to 168h")]
    Duration(String),
}

/// A window as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// The days it opens on; every day when empty.
    days: Vec<Weekday>,
    /// Minutes after midnight UTC.
    start: i64,
    duration: SignedDuration,
}

impl Window {
    pub fn parse(window: &MaintenanceWindow) -> Result<Window, WindowError> {
        let days = window
            .days
            .iter()
            .map(|d| weekday(d).ok_or_else(|| WindowError::Day(d.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        let start =
            minutes(&window.start).ok_or_else(|| WindowError::Start(window.start.clone()))?;
        let duration = window
            .duration
            .parse::<SignedDuration>()
            .ok()
            .filter(|d| *d >= SignedDuration::from_mins(1) && *d <= SignedDuration::from_hours(168))
            .ok_or_else(|| WindowError::Duration(window.duration.clone()))?;
        Ok(Window {
            days,
            start,
            duration,
        })
    }

    /// When it opens on `date`, if it opens that day.
    fn opening(&self, date: Date) -> Option<Timestamp> {
        if !self.days.is_empty() && !self.days.contains(&date.weekday()) {
            return None;
        }
        let midnight = date.to_zoned(TimeZone::UTC).ok()?.timestamp();
        midnight
            .checked_add(SignedDuration::from_mins(self.start))
            .ok()
    }

    /// The openings from eight days before `now` to eight days after, in order.
    fn openings_around(&self, now: Timestamp) -> impl Iterator<Item = Timestamp> + '_ {
        let today = now.to_zoned(TimeZone::UTC).date();
        (-8..=8).filter_map(move |offset: i64| {
            let date = today.checked_add(offset.days()).ok()?;
            self.opening(date)
        })
    }

    fn is_open(&self, now: Timestamp) -> bool {
        self.openings_around(now).any(|opens| {
            opens <= now
                && opens
                    .checked_add(self.duration)
                    .is_ok_and(|closes| now < closes)
        })
    }

    fn next_opening(&self, now: Timestamp) -> Option<Timestamp> {
        self.openings_around(now).find(|opens| *opens > now)
    }
}

/// Whether any window is open at `now`.
pub fn any_open(windows: &[Window], now: Timestamp) -> bool {
    windows.iter().any(|w| w.is_open(now))
}

/// When the next window opens after `now`.
pub fn next_opening(windows: &[Window], now: Timestamp) -> Option<Timestamp> {
    windows.iter().filter_map(|w| w.next_opening(now)).min()
}

fn weekday(name: &str) -> Option<Weekday> {
    let lower = name.to_ascii_lowercase();
    let days = [
        ("monday", Weekday::Monday),
        ("tuesday", Weekday::Tuesday),
        ("wednesday", Weekday::Wednesday),
        ("thursday", Weekday::Thursday),
        ("friday", Weekday::Friday),
        ("saturday", Weekday::Saturday),
        ("sunday", Weekday::Sunday),
    ];
    days.iter()
        .find(|(full, _)| lower == *full || (lower.len() == 3 && full.starts_with(&lower)))
        .map(|(_, day)| *day)
}

/// `HH:MM` as minutes after midnight.
fn minutes(text: &str) -> Option<i64> {
    let (h, m) = text.split_once(':')?;
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    ((0..24).contains(&h) && (0..60).contains(&m) && text.len() == 5).then_some(h * 60 + m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(days: &[&str], start: &str, duration: &str) -> Window {
        Window::parse(&MaintenanceWindow {
            days: days.iter().map(ToString::to_string).collect(),
            start: start.into(),
            duration: duration.into(),
        })
        .unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_window_is_open_from_its_start_for_its_duration_on_its_days() {
        // 2026-11-28 is a Saturday.
        let saturday_night = [window(&["Sat"], "22:00", "4h")];
        assert!(!any_open(&saturday_night, at("2026-11-28T21:59:59Z")));
        assert!(any_open(&saturday_night, at("2026-11-28T22:00:00Z")));
        // It runs past midnight into Sunday.
        assert!(any_open(&saturday_night, at("2026-11-29T01:59:00Z")));
        assert!(!any_open(&saturday_night, at("2026-11-29T02:00:00Z")));
        assert_eq!(
            next_opening(&saturday_night, at("2026-11-29T02:00:00Z")),
            Some(at("2026-12-05T22:00:00Z"))
        );
        let daily = [
            window(&[], "02:00", "90m"),
            window(&["sunday"], "12:00", "1h"),
        ];
        assert!(any_open(&daily, at("2026-11-29T03:29:00Z")));
        assert_eq!(
            next_opening(&daily, at("2026-11-29T03:30:00Z")),
            Some(at("2026-11-29T12:00:00Z"))
        );
    }

    #[test]
    fn a_bad_window_is_named_by_its_field() {
        let bad = |days: &[&str], start: &str, duration: &str| {
            Window::parse(&MaintenanceWindow {
                days: days.iter().map(ToString::to_string).collect(),
                start: start.into(),
                duration: duration.into(),
            })
            .unwrap_err()
        };
        assert_eq!(
            bad(&["Caturday"], "02:00", "1h"),
            WindowError::Day("Caturday".into())
        );
        assert_eq!(bad(&[], "2:00", "1h"), WindowError::Start("2:00".into()));
        assert_eq!(bad(&[], "24:00", "1h"), WindowError::Start("24:00".into()));
        assert_eq!(
            bad(&[], "02:00", "forever"),
            WindowError::Duration("forever".into())
        );
        assert_eq!(
            bad(&[], "02:00", "200h"),
            WindowError::Duration("200h".into())
        );
        assert_eq!(
            window(&[], "02:00", "1h30m").duration,
            SignedDuration::from_mins(90)
        );
    }
}
