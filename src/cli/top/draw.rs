//! Drawing the board: a header with the keys, the sessions and runtimes, the
//! latest messages, a status line; a message's details over them. Laid out
//! for 80 columns and 24 rows, the smallest terminal it is made for.

use agent_comms_core::control::messages::InvocationView;
use agent_comms_core::store::{Invocation, InvocationStatus};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::{Line, Text};
use ratatui::widgets::{
    Block, Borders, Clear, Paragraph, Row as TableRow, Table, TableState, Wrap,
};
use ratatui::Frame;

use super::board::{Board, Focus, Row};

/// What the bottom line says.
pub enum Footer<'a> {
    Keys,
    Filtering,
    Said(&'a str),
}

pub fn board(frame: &mut Frame, board: &Board, now: u64, footer: Footer<'_>) {
    let rows = board.rows(now);
    let messages = board.messages();
    let [head, top, bottom, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Percentage(50),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let filter = if board.filter.is_empty() {
        String::new()
    } else {
        format!(" · filter: {}", board.filter)
    };
    frame.render_widget(
        Line::from(format!(
            "agent-comms top · {} sessions/runtimes · {} messages{filter}",
            rows.len(),
            messages.len()
        ))
        .bold(),
        head,
    );
    sessions(frame, top, &rows, board);
    message_list(frame, bottom, &messages, board, now);
    let foot_text = match footer {
        Footer::Keys => {
            "q quit  ↑↓ move  Tab switch  Enter/a attach  m message  r redeliver  / filter"
                .to_owned()
        }
        Footer::Filtering => format!("filter: {}▏ (Enter keeps, Esc clears)", board.filter),
        Footer::Said(text) => text.to_owned(),
    };
    frame.render_widget(Line::from(foot_text).reversed(), foot);
}

fn block(title: &str, focused: bool) -> Block<'_> {
    let block = Block::default().borders(Borders::TOP).title(title);
    if focused {
        block.border_style(Style::default().add_modifier(Modifier::BOLD))
    } else {
        block
    }
}

fn sessions(frame: &mut Frame, area: Rect, rows: &[Row], board: &Board) {
    let lines = rows.iter().map(|r| {
        TableRow::new(vec![
            r.name.clone(),
            r.kind.clone(),
            r.provider.clone(),
            r.state.clone(),
            r.person.clone(),
            r.pending.to_string(),
            r.in_flight.to_string(),
            r.last_latency.map_or("-".into(), duration),
            r.heartbeat_age.map_or("-".into(), duration),
        ])
    });
    let widths = [
        Constraint::Length(12),
        Constraint::Length(11),
        Constraint::Length(11),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(7),
        Constraint::Length(5),
    ];
    let header = vec![
        "NAME", "KIND", "PROVIDER", "STATE", "PERSON", "PEND", "FLY", "LAST", "BEAT",
    ];
    let table = Table::new(lines, widths);
    let list = List {
        title: "sessions and runtimes",
        header,
        focus: Focus::Sessions,
    };
    list.render(frame, area, table, board, board.selected_session);
}

/// One of the board's two lists: its title, its column names, and the
/// focus under which its selected row is highlighted.
struct List {
    title: &'static str,
    header: Vec<&'static str>,
    focus: Focus,
}

impl List {
    fn render(self, frame: &mut Frame, area: Rect, table: Table, board: &Board, selected: usize) {
        let focused = board.focus() == self.focus;
        let table = table
            .header(TableRow::new(self.header).underlined())
            .block(block(self.title, focused))
            .row_highlight_style(Style::default().reversed());
        let mut state = TableState::default().with_selected(focused.then_some(selected));
        frame.render_stateful_widget(table, area, &mut state);
    }
}

fn message_list(frame: &mut Frame, area: Rect, messages: &[&Invocation], board: &Board, now: u64) {
    let lines = messages.iter().map(|m| {
        TableRow::new(vec![
            m.id.clone(),
            m.from.clone(),
            m.to.clone(),
            m.status.as_str().to_owned(),
            duration(now.saturating_sub(m.created)),
            agent_comms_core::display::one_line(&m.body).into_owned(),
        ])
    });
    let widths = [
        Constraint::Length(16),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(11),
        Constraint::Length(5),
        Constraint::Fill(1),
    ];
    let header = vec!["ID", "FROM", "TO", "STATUS", "AGE", "BODY"];
    let table = Table::new(lines, widths);
    let list = List {
        title: "messages, latest first",
        header,
        focus: Focus::Messages,
    };
    list.render(frame, area, table, board, board.selected_message);
}

/// One message in full over the board (`m`).
pub fn message(frame: &mut Frame, view: &InvocationView) {
    let area = frame.area();
    let area = Rect {
        x: area.x + 2,
        y: area.y + 2,
        width: area.width.saturating_sub(4),
        height: area.height.saturating_sub(4),
    };
    let mut text = Text::default();
    text.push_line(format!("{} → {}   {}", view.from, view.to, view.status));
    text.push_line(format!("created {}", view.created));
    if let Some(at) = &view.delivered {
        text.push_line(format!("delivered {at}"));
    }
    if let Some(reason) = &view.reason {
        text.push_line(format!("reason: {reason}"));
    }
    text.push_line(format!("attempts: {}", view.attempts));
    text.push_line("");
    for line in view.body.as_deref().unwrap_or("").lines() {
        text.push_line(line.to_owned());
    }
    let redeliverable = matches!(
        view.status,
        InvocationStatus::Failed | InvocationStatus::Unavailable
    );
    let title = if redeliverable {
        format!(" {} · r redeliver · Esc close ", view.id)
    } else {
        format!(" {} · Esc close ", view.id)
    };
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(text)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

/// A short duration: 850ms, 4.2s, 3m, 2h, 5d.
pub fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m", ms / 60_000),
        3_600_000..86_400_000 => format!("{}h", ms / 3_600_000),
        _ => format!("{}d", ms / 86_400_000),
    }
}

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_fit_their_column() {
        let cases = [
            (0, "0ms"),
            (999, "999ms"),
            (1_000, "1.0s"),
            (4_250, "4.2s"),
            (59_999, "60.0s"),
            (60_000, "1m"),
            (7_200_000, "2h"),
            (90_000_000_000, "1041d"),
        ];
        for (ms, text) in cases {
            assert_eq!(duration(ms), text, "{ms} ms");
            assert!(text.len() <= 5, "{text} is wider than the BEAT column");
        }
    }
}
