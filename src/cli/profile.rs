//! `superstep profile [QUERY] -o program.trace.json`: build, then write the
//! program's modelled timeline as a Chrome / Perfetto trace
//! (`crate::report::trace`), with per-tile exchange windows for the tiles
//! asked for (default: the two tiles that move the most words and the tile
//! with peak SRAM).

use std::path::PathBuf;
use std::time::Instant;

use super::arguments::QueryArguments;
use super::command_error::CommandError;
use super::common::{build_checked, finish_cache, load, open_session};
use crate::report::trace::{PhaseLabel, TraceTile, program_trace};
use crate::session::{PhaseFigures, Session};
use crate::text::thousands;

/// The flags of `superstep profile`.
#[derive(Debug, clap::Args)]
pub struct ProfileArguments {
    #[command(flatten)]
    pub query: QueryArguments,
    /// The trace file to write (e.g. program.trace.json).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Tiles shown in detail, e.g. `0,7,100-103` (at most 64; default:
    /// the two tiles that move the most words and the peak-SRAM tile).
    #[arg(long, value_name = "LIST", value_parser = parse_tile_list)]
    pub tiles: Option<TileList>,
}

/// Tiles shown by default: this many of the busiest, plus the peak-SRAM tile.
pub const DEFAULT_BUSIEST_TILES: usize = 2;

/// The most tiles `--tiles` may name (each adds two tracks).
pub const MAX_TRACE_TILES: usize = 64;

/// Tiles named on the command line, in order, without repeats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileList(pub Vec<u32>);

/// A `--tiles` list that names no tiles this command can show.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TileListError {
    #[error("`{0}` is not a tile or a range of tiles (e.g. 0,7,100-103)")]
    NotATile(String),
    #[error("`{0}`: the range runs backwards")]
    Backwards(String),
    #[error("at most {MAX_TRACE_TILES} tiles")]
    TooMany,
    #[error("no tile named (e.g. 0,7,100-103)")]
    Empty,
}

/// `--tiles`' parser.
pub fn parse_tile_list(text: &str) -> Result<TileList, TileListError> {
    parse_tiles(text).map(TileList)
}

/// Parses `0,7,100-103` into tiles, in order, without repeats.
pub fn parse_tiles(text: &str) -> Result<Vec<u32>, TileListError> {
    let mut tiles = Vec::new();
    for part in text
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        let number = |digits: &str| {
            digits
                .trim()
                .parse::<u32>()
                .map_err(|_| TileListError::NotATile(part.to_string()))
        };
        let (first, last) = match part.split_once('-') {
            Some((first, last)) => (number(first)?, number(last)?),
            None => {
                let tile = number(part)?;
                (tile, tile)
            }
        };
        if first > last {
            return Err(TileListError::Backwards(part.to_string()));
        }
        for tile in first..=last {
            if !tiles.contains(&tile) {
                tiles.push(tile);
            }
            if tiles.len() > MAX_TRACE_TILES {
                return Err(TileListError::TooMany);
            }
        }
    }
    if tiles.is_empty() {
        return Err(TileListError::Empty);
    }
    Ok(tiles)
}

fn chosen_tiles(
    session: &Session,
    asked: Option<&[u32]>,
    tiles: u32,
) -> Result<Vec<TraceTile>, CommandError> {
    let internal = |error: &dyn std::fmt::Display| CommandError::Internal(error.to_string());
    if let Some(asked) = asked {
        if let Some(&outside) = asked.iter().find(|&&tile| tile >= tiles) {
            return Err(CommandError::Input(format!(
                "error: --tiles: tile {outside} is not on this machine (tiles 0..={})\n  help: name tiles below {tiles}",
                tiles - 1
            )));
        }
        return Ok(asked
            .iter()
            .map(|&tile| TraceTile {
                tile,
                reason: String::from("asked"),
            })
            .collect());
    }
    let mut chosen: Vec<TraceTile> = session
        .busiest_tiles(DEFAULT_BUSIEST_TILES)
        .map_err(|error| internal(&error))?
        .into_iter()
        .map(|tile| TraceTile {
            tile,
            reason: String::from("busiest exchange"),
        })
        .collect();
    let peak = session.placement()?.max_peak.0;
    match chosen.iter_mut().find(|tile| tile.tile == peak) {
        Some(tile) => tile.reason.push_str(", peak SRAM"),
        None => chosen.push(TraceTile {
            tile: peak,
            reason: String::from("peak SRAM"),
        }),
    }
    Ok(chosen)
}

pub fn run(arguments: &ProfileArguments) -> Result<(), CommandError> {
    let tiles = arguments.tiles.as_ref().map(|list| list.0.as_slice());
    let mut query = load(&arguments.query)?;
    let mut session = open_session(&arguments.query, &mut query)?;
    build_checked(&mut session, &query, &arguments.query)?;
    let started = Instant::now();
    let internal = |error: &dyn std::fmt::Display| CommandError::Internal(error.to_string());
    let chosen = chosen_tiles(&session, tiles, query.machine.tiles)?;
    let profile = session.profile()?;
    let figures: Vec<PhaseFigures> = session
        .map_phases(|phase| phase.figures())
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|error| internal(&error))?;
    let labels: Vec<PhaseLabel> = figures
        .iter()
        .map(|figures| PhaseLabel {
            policy: figures.policy,
            chosen: figures.chosen,
            horizon: u64::from(figures.horizon),
            endpoint_bound: figures.endpoint_bound,
            max_row_bytes: figures.max_row_bytes,
            total_row_bytes: figures.total_row_bytes,
        })
        .collect();
    let tile_numbers: Vec<u32> = chosen.iter().map(|tile| tile.tile).collect();
    let activity = session
        .tile_activity(&tile_numbers)
        .map_err(|error| internal(&error))?;
    let trace = program_trace(&query.name, &profile, &labels, &chosen, &activity);
    let text = serde_json::to_string(&trace).map_err(|error| internal(&error))?;
    super::common::write_output(&arguments.output, text.as_bytes())?;
    let events = trace["traceEvents"].as_array().map_or(0, Vec::len);
    print_note!(
        "wrote {} ({} bytes, {} events; {} cycles = {:.3} ms modelled; tiles {}) in {:.3} s",
        arguments.output.display(),
        thousands(text.len() as u64),
        thousands(events as u64),
        thousands(profile.total_cycles()),
        crate::target::costs::cycles_to_ms(profile.total_cycles()),
        chosen
            .iter()
            .map(|tile| format!("{} ({})", tile.tile, tile.reason))
            .collect::<Vec<_>>()
            .join(", "),
        started.elapsed().as_secs_f64()
    );
    print_line!("open it in ui.perfetto.dev or chrome://tracing");
    finish_cache(session.cache());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_parse_as_lists_and_ranges() {
        assert_eq!(
            parse_tiles("0,7,100-103"),
            Ok(vec![0, 7, 100, 101, 102, 103])
        );
        assert_eq!(parse_tiles("5, 5,4-5"), Ok(vec![5, 4]));
        assert_eq!(
            parse_tiles("3-1"),
            Err(TileListError::Backwards(String::from("3-1")))
        );
        assert_eq!(
            parse_tiles("x"),
            Err(TileListError::NotATile(String::from("x")))
        );
        assert_eq!(parse_tiles(""), Err(TileListError::Empty));
        assert_eq!(parse_tiles("0-100"), Err(TileListError::TooMany));
    }
}
