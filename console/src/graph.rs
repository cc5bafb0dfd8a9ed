//! The saga's state machine as a picture for the operator console's order page: an SVG laid out
//! from the Amazon States Language definition itself (layers by longest path, rows ordered by
//! barycenter), so a changed definition draws a changed picture. Pure: JSON in, a string out.

use std::collections::HashSet;

use serde_json::Value;

/// Width of one character of a state's name, estimated for the 13px sans-serif font.
const CHAR_WIDTH: f64 = 7.5;
/// Room beside the longest name inside a box, both sides together.
const BOX_PADDING: f64 = 28.0;
const MIN_BOX_WIDTH: f64 = 110.0;
const BOX_HEIGHT: f64 = 42.0;
/// Between one row's boxes and the next row's: the room the edges curve in.
const ROW_GAP: f64 = 54.0;
/// Between two boxes in a row.
const BOX_GAP: f64 = 32.0;
/// Between an edge passing through a row and whatever is beside it.
const LANE_GAP: f64 = 18.0;
/// Between the edges that leave (or enter) one side of a box.
const PORT_SPACING: f64 = 18.0;
const MARGIN: f64 = 16.0;
/// How far a state's loop to itself reaches right of its box.
const LOOP_REACH: f64 = 30.0;
const LEGEND_HEIGHT: f64 = 30.0;
const LEGEND_WIDTH: f64 = 250.0;
/// Rounds of reordering rows to reduce crossings; each sweeps down, then up.
const ORDER_SWEEPS: usize = 6;
/// Rounds of moving each box towards its neighbours.
const PLACE_ROUNDS: usize = 60;
/// How strongly a Catch pulls on the boxes it joins, against 1 for a `Next`: the picture's
/// spine is the path an order takes when nothing fails.
const CATCH_PULL: f64 = 0.02;
/// How much more strongly a transition's slots in the rows it passes pull on each other: long
/// transitions run straight down and bend only at their ends.
const LANE_PULL: f64 = 40.0;

/// The stylesheet inside the SVG: the default look, by class. Constant, so a page whose
/// Content-Security-Policy refuses inline styles can allow it by its hash; scoped to the picture
/// because a `<style>` in inline SVG applies to the whole page.
pub const STYLE: &str = "\
    .saga-graph{height:auto;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif}\
    .saga-graph .state rect{fill:#fff;stroke:#6b7280;stroke-width:1.5}\
    .saga-graph .state-succeed rect{stroke:#15803d}\
    .saga-graph .state-fail rect{stroke:#b91c1c}\
    .saga-graph .visited rect{fill:#dbeafe}\
    .saga-graph .current rect{stroke:#0f172a;stroke-width:3.5}\
    .saga-graph .state-name{font-size:13px;fill:#111827}\
    .saga-graph .current .state-name{font-weight:bold}\
    .saga-graph .state-type,.saga-graph .legend{font-size:11px;fill:#6b7280}\
    .saga-graph .edge{fill:none;stroke:#6b7280;stroke-width:1.5}\
    .saga-graph .edge-catch{stroke-dasharray:5 4}\
    .saga-graph .arrowhead{fill:#6b7280}";

/// Why a definition cannot be laid out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("the definition is not a JSON object")]
    NotAnObject,
    #[error("the definition has no `StartAt` string")]
    NoStartAt,
    #[error("the definition has no `States` object")]
    NoStates,
    #[error("state `{0}` has no `Type` string")]
    NoType(String),
    #[error("`{named_by}` names `{name}`, which is not one of the `States`")]
    UnknownState { named_by: String, name: String },
}

/// The saga's states laid out in layers, from an ASL definition.
#[derive(Debug, Clone)]
pub struct Graph {
    /// In layout order: row by row, left to right.
    states: Vec<Placed>,
    routes: Vec<Route>,
    box_width: f64,
    width: f64,
    height: f64,
}

/// A state with its box: `x` is the box's centre, `y` its top.
#[derive(Debug, Clone)]
struct Placed {
    name: String,
    kind: String,
    x: f64,
    y: f64,
}

/// A transition as drawn.
#[derive(Debug, Clone)]
struct Route {
    catch: bool,
    shape: Shape,
}

#[derive(Debug, Clone)]
enum Shape {
    /// From the source's edge to the target's: alternately a gap between rows (drawn curved)
    /// and a row passed by (drawn straight), starting and ending with a gap.
    Through(Vec<(f64, f64)>),
    /// A state's transition to itself, on the right of its box (whose right middle is given).
    Loop((f64, f64)),
}

impl Graph {
    /// Lays out the top-level `States` of `definition` (parsed ASL JSON): errors when it is not
    /// an object with `StartAt` and `States`, or a transition names a state that is not there.
    pub fn layout(definition: &Value) -> Result<Graph, LayoutError> {
        let machine = Machine::parse(definition)?;
        let count = machine.states.len();
        let search = Search::run(&machine);
        let layers = search.layers(&machine);

        // Sugiyama's layered graph: one slot per state, then one per row a transition passes
        // by, so a long transition is routed between boxes rather than through them.
        let mut slot_layer = layers.clone();
        let mut chains = Vec::new();
        let mut loops = Vec::new();
        for (t, transition) in machine.transitions.iter().enumerate() {
            if transition.from == transition.to {
                loops.push(t);
                continue;
            }
            // A back edge is laid out reversed, then drawn pointing the right way.
            let (top, bottom) = if search.back[t] {
                (transition.to, transition.from)
            } else {
                (transition.from, transition.to)
            };
            let mut chain = vec![top];
            for layer in layers[top] + 1..layers[bottom] {
                slot_layer.push(layer);
                chain.push(slot_layer.len() - 1);
            }
            chain.push(bottom);
            chains.push((t, chain));
        }
        let slots = slot_layer.len();
        let (mut up, mut down) = (vec![Vec::new(); slots], vec![Vec::new(); slots]);
        for (t, chain) in &chains {
            let pull = if machine.transitions[*t].catch {
                CATCH_PULL
            } else {
                1.0
            };
            for link in chain.windows(2) {
                let lane = link[0] >= count && link[1] >= count;
                let pull = if lane { pull * LANE_PULL } else { pull };
                down[link[0]].push((link[1], pull));
                up[link[1]].push((link[0], pull));
            }
        }
        let mut rows = vec![Vec::new(); layers.iter().max().map_or(0, |deepest| deepest + 1)];
        for &state in &search.preorder {
            rows[layers[state]].push(state);
        }
        for slot in count..slots {
            rows[slot_layer[slot]].push(slot);
        }
        order_rows(&mut rows, &up, &down);

        let longest = machine.states.iter().map(|(name, _)| name.chars().count());
        let box_width =
            (longest.max().unwrap_or(0) as f64 * CHAR_WIDTH + BOX_PADDING).max(MIN_BOX_WIDTH);
        let widths: Vec<f64> = (0..slots)
            .map(|slot| if slot < count { box_width } else { 0.0 })
            .collect();
        let mut x = place(&rows, &up, &down, &widths);
        let looped: HashSet<usize> = loops.iter().map(|&t| machine.transitions[t].from).collect();
        let left = (0..slots)
            .map(|s| x[s] - widths[s] / 2.0)
            .fold(f64::INFINITY, f64::min);
        let right = (0..slots)
            .map(|s| {
                let reach = if looped.contains(&s) { LOOP_REACH } else { 0.0 };
                x[s] + widths[s] / 2.0 + reach
            })
            .fold(f64::NEG_INFINITY, f64::max);
        for position in &mut x {
            *position += MARGIN - left;
        }
        let top = |slot: usize| MARGIN + slot_layer[slot] as f64 * (BOX_HEIGHT + ROW_GAP);

        // Each box spreads the edges on one side in the order of where they go, so they
        // neither overlap nor cross at the box.
        let mut leave = vec![0.0; chains.len()];
        let mut arrive = vec![0.0; chains.len()];
        for state in 0..count {
            let bottom: Vec<(usize, f64)> = (chains.iter().enumerate())
                .filter(|(_, (_, chain))| chain[0] == state)
                .map(|(c, (_, chain))| (c, x[chain[1]]))
                .collect();
            let upper: Vec<(usize, f64)> = (chains.iter().enumerate())
                .filter(|(_, (_, chain))| chain[chain.len() - 1] == state)
                .map(|(c, (_, chain))| (c, x[chain[chain.len() - 2]]))
                .collect();
            spread(x[state], box_width, bottom, &mut leave);
            spread(x[state], box_width, upper, &mut arrive);
        }
        let mut routes = Vec::new();
        for (c, (t, chain)) in chains.iter().enumerate() {
            let mut points = vec![(leave[c], top(chain[0]) + BOX_HEIGHT)];
            for &slot in &chain[1..chain.len() - 1] {
                points.push((x[slot], top(slot)));
                points.push((x[slot], top(slot) + BOX_HEIGHT));
            }
            points.push((arrive[c], top(chain[chain.len() - 1])));
            if search.back[*t] {
                points.reverse();
            }
            let catch = machine.transitions[*t].catch;
            routes.push(Route {
                catch,
                shape: Shape::Through(points),
            });
        }
        for &t in &loops {
            let state = machine.transitions[t].from;
            let middle = (x[state] + box_width / 2.0, top(state) + BOX_HEIGHT / 2.0);
            let catch = machine.transitions[t].catch;
            routes.push(Route {
                catch,
                shape: Shape::Loop(middle),
            });
        }

        let states = (rows.iter().flatten())
            .filter(|&&slot| slot < count)
            .map(|&state| Placed {
                name: machine.states[state].0.clone(),
                kind: machine.states[state].1.clone(),
                x: x[state],
                y: top(state),
            })
            .collect();
        let width = (right - left + 2.0 * MARGIN).max(LEGEND_WIDTH + 2.0 * MARGIN);
        let height = MARGIN + rows.len() as f64 * (BOX_HEIGHT + ROW_GAP) - ROW_GAP + MARGIN;
        Ok(Graph {
            states,
            routes,
            box_width,
            width,
            height: height + LEGEND_HEIGHT,
        })
    }

    /// The state names in layout order.
    pub fn states(&self) -> impl Iterator<Item = &str> {
        self.states.iter().map(|state| state.name.as_str())
    }

    /// The SVG (a complete `<svg ...>` element, no XML prolog), with the states in `visited`
    /// marked as passed through and `current` (if any) marked as the one the order is in.
    pub fn svg(&self, visited: &HashSet<String>, current: Option<&str>) -> String {
        let (width, height) = (num(self.width), num(self.height));
        let mut out = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="saga-graph" viewBox="0 0 {width} {height}" width="100%" role="img" aria-labelledby="saga-graph-title" aria-describedby="saga-graph-desc">"#
        );
        let count = self.states.len();
        let plural = if count == 1 { "" } else { "s" };
        let mut title = format!("The order saga: {count} state{plural}");
        if let Some(current) = current {
            title.push_str("; in ");
            title.push_str(current);
        }
        let passed: Vec<&str> = self
            .states()
            .filter(|name| visited.contains(*name))
            .collect();
        let desc = if passed.is_empty() {
            "No state passed through yet.".to_owned()
        } else {
            format!("Passed through: {}.", passed.join(", "))
        };
        out.push_str(&format!(
            r#"<title id="saga-graph-title">{}</title><desc id="saga-graph-desc">{}</desc>"#,
            escape(&title),
            escape(&desc)
        ));
        // The drawing's few presentation attributes (fills, strokes, font sizes) keep it legible,
        // if unmarked, where a page's Content-Security-Policy refuses this `<style>`; any CSS
        // overrides them.
        out.push_str("<style>");
        out.push_str(STYLE);
        out.push_str("</style>");
        out.push_str(
            r##"<defs><marker id="saga-graph-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="10" markerHeight="10" markerUnits="userSpaceOnUse" orient="auto"><path class="arrowhead" d="M0,1 L10,5 L0,9 z" fill="#6b7280"/></marker></defs>"##,
        );
        out.push_str(r#"<g class="edges">"#);
        for route in &self.routes {
            out.push_str(&edge(route.catch, &route.shape.path()));
        }
        out.push_str("</g><g class=\"states\">");
        for state in &self.states {
            out.push_str(&self.state(state, visited, current));
        }
        out.push_str("</g>");
        let y = self.height - LEGEND_HEIGHT / 2.0;
        let line = |x: f64, catch: bool| edge(catch, &format!("M{},{} h24", num(x), num(y)));
        out.push_str(&format!(
            r#"<g class="legend-key">{}<text class="legend" x="{}" y="{}" font-size="11">next</text>{}<text class="legend" x="{}" y="{}" font-size="11">on error (Catch)</text></g>"#,
            line(MARGIN, false),
            num(MARGIN + 30.0),
            num(y + 4.0),
            line(MARGIN + 80.0, true),
            num(MARGIN + 110.0),
            num(y + 4.0),
        ));
        out.push_str("</svg>");
        out
    }

    /// One state's group: its box, name and type, and a title saying where the order stands.
    fn state(&self, state: &Placed, visited: &HashSet<String>, current: Option<&str>) -> String {
        let is_visited = visited.contains(&state.name);
        let is_current = current == Some(state.name.as_str());
        let mut class = format!("state {}", type_class(&state.kind));
        if is_visited {
            class.push_str(" visited");
        }
        if is_current {
            class.push_str(" current");
        }
        let standing = if is_current {
            "the order is here"
        } else if is_visited {
            "passed through"
        } else {
            "not reached"
        };
        let (name, kind) = (escape(&state.name), escape(&state.kind));
        format!(
            r##"<g class="{class}"><title>{name} ({kind} state): {standing}</title><rect x="{}" y="{}" width="{}" height="{}" rx="8" fill="#fff" stroke="#6b7280"/><text class="state-name" x="{}" y="{}" text-anchor="middle" font-size="13">{name}</text><text class="state-type" x="{}" y="{}" text-anchor="middle" font-size="11">{kind}</text></g>"##,
            num(state.x - self.box_width / 2.0),
            num(state.y),
            num(self.box_width),
            num(BOX_HEIGHT),
            num(state.x),
            num(state.y + 18.0),
            num(state.x),
            num(state.y + 33.0),
        )
    }
}

impl Shape {
    /// The SVG path data.
    fn path(&self) -> String {
        match self {
            Shape::Through(points) => {
                let (x, y) = points[0];
                let mut d = format!("M{},{}", num(x), num(y));
                for (i, pair) in points.windows(2).enumerate() {
                    let ((x1, y1), (x2, y2)) = (pair[0], pair[1]);
                    if i % 2 == 0 {
                        // Leaves and enters vertically, so arrowheads sit square on the box.
                        let middle = num((y1 + y2) / 2.0);
                        d.push_str(&format!(
                            " C{},{middle} {},{middle} {},{}",
                            num(x1),
                            num(x2),
                            num(x2),
                            num(y2)
                        ));
                    } else {
                        d.push_str(&format!(" L{},{}", num(x2), num(y2)));
                    }
                }
                d
            }
            Shape::Loop((x, y)) => {
                let reach = num(x + LOOP_REACH);
                format!(
                    "M{},{} C{reach},{} {reach},{} {},{}",
                    num(*x),
                    num(y - 8.0),
                    num(y - 26.0),
                    num(y + 26.0),
                    num(*x),
                    num(y + 8.0)
                )
            }
        }
    }
}

/// Spreads the edges on one side of a box centred on `centre`, given as (edge, where its other
/// end is), in the order of their other ends: sets each edge's `ports` entry.
fn spread(centre: f64, box_width: f64, mut side: Vec<(usize, f64)>, ports: &mut [f64]) {
    side.sort_by(|a, b| a.1.total_cmp(&b.1));
    let k = side.len();
    let spacing = if k > 1 {
        PORT_SPACING.min((box_width - BOX_PADDING) / (k - 1) as f64)
    } else {
        0.0
    };
    for (i, &(edge, _)) in side.iter().enumerate() {
        ports[edge] = centre + (i as f64 - (k - 1) as f64 / 2.0) * spacing;
    }
}

/// A `<path>` for an edge with path data `d`, ending in an arrowhead.
fn edge(catch: bool, d: &str) -> String {
    let (class, dashes) = if catch {
        ("edge edge-catch", r#" stroke-dasharray="5 4""#)
    } else {
        ("edge", "")
    };
    format!(
        r##"<path class="{class}" d="{d}" fill="none" stroke="#6b7280"{dashes} marker-end="url(#saga-graph-arrow)"/>"##
    )
}

/// The CSS class for a state's `Type`.
fn type_class(kind: &str) -> &'static str {
    match kind {
        "Task" => "state-task",
        "Choice" => "state-choice",
        "Pass" => "state-pass",
        "Wait" => "state-wait",
        "Succeed" => "state-succeed",
        "Fail" => "state-fail",
        "Parallel" => "state-parallel",
        "Map" => "state-map",
        _ => "state-other",
    }
}

/// `text` safe in SVG text and in attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate to a tenth of a pixel, without a trailing `.0`.
fn num(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// The states and transitions of a definition, states numbered in the definition's order.
struct Machine {
    /// Name and `Type`.
    states: Vec<(String, String)>,
    start: usize,
    /// At most one per pair of states: solid if any of them is.
    transitions: Vec<Transition>,
}

struct Transition {
    from: usize,
    to: usize,
    catch: bool,
}

impl Machine {
    fn parse(definition: &Value) -> Result<Machine, LayoutError> {
        let object = definition.as_object().ok_or(LayoutError::NotAnObject)?;
        let start =
            (object.get("StartAt").and_then(Value::as_str)).ok_or(LayoutError::NoStartAt)?;
        let states =
            (object.get("States").and_then(Value::as_object)).ok_or(LayoutError::NoStates)?;
        let find = |named_by: &str, name: &str| {
            states
                .keys()
                .position(|key| key == name)
                .ok_or_else(|| LayoutError::UnknownState {
                    named_by: named_by.to_owned(),
                    name: name.to_owned(),
                })
        };
        let mut parsed = Vec::with_capacity(states.len());
        let mut transitions: Vec<Transition> = Vec::new();
        for (from, (name, state)) in states.iter().enumerate() {
            let kind = (state.get("Type").and_then(Value::as_str))
                .ok_or_else(|| LayoutError::NoType(name.clone()))?;
            parsed.push((name.clone(), kind.to_owned()));
            for (target, catch) in targets(state) {
                let to = find(name, target)?;
                match transitions
                    .iter_mut()
                    .find(|t| t.from == from && t.to == to)
                {
                    Some(existing) => existing.catch &= catch,
                    None => transitions.push(Transition { from, to, catch }),
                }
            }
        }
        Ok(Machine {
            states: parsed,
            start: find("StartAt", start)?,
            transitions,
        })
    }
}

/// Where `state` goes next, each with whether it is on error: `Next`, the Choice's `Choices`
/// and `Default`, then `Catch`.
fn targets(state: &Value) -> Vec<(&str, bool)> {
    fn next(rule: &Value) -> Option<&str> {
        rule.get("Next").and_then(Value::as_str)
    }
    let rules = |key: &str| {
        state
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    };
    let solid = (next(state).into_iter())
        .chain(rules("Choices").filter_map(next))
        .chain(state.get("Default").and_then(Value::as_str));
    let solid = solid.map(|target| (target, false));
    solid
        .chain(rules("Catch").filter_map(next).map(|target| (target, true)))
        .collect()
}

/// A depth-first search from the start, then from any state it did not reach.
struct Search {
    /// By transition: whether it goes back to a state on the search's path (closes a cycle).
    back: Vec<bool>,
    /// States in the order first reached: the rows' starting order, the `Next` path leftmost.
    preorder: Vec<usize>,
    /// States in the order finished; reversed, a topological order without the back edges.
    postorder: Vec<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    New,
    OnPath,
    Done,
}

impl Search {
    fn run(machine: &Machine) -> Search {
        let count = machine.states.len();
        let mut outgoing = vec![Vec::new(); count];
        for (t, transition) in machine.transitions.iter().enumerate() {
            outgoing[transition.from].push(t);
        }
        let mut mark = vec![Mark::New; count];
        let mut search = Search {
            back: vec![false; machine.transitions.len()],
            preorder: Vec::with_capacity(count),
            postorder: Vec::with_capacity(count),
        };
        for root in std::iter::once(machine.start).chain(0..count) {
            if mark[root] != Mark::New {
                continue;
            }
            mark[root] = Mark::OnPath;
            search.preorder.push(root);
            // The path: each state with how many of its transitions have been followed.
            let mut path = vec![(root, 0)];
            while let Some(&(state, followed)) = path.last() {
                let Some(&t) = outgoing[state].get(followed) else {
                    mark[state] = Mark::Done;
                    search.postorder.push(state);
                    path.pop();
                    continue;
                };
                let last = path.len() - 1;
                path[last].1 += 1;
                let to = machine.transitions[t].to;
                match mark[to] {
                    Mark::New => {
                        mark[to] = Mark::OnPath;
                        search.preorder.push(to);
                        path.push((to, 0));
                    }
                    Mark::OnPath => search.back[t] = true,
                    Mark::Done => {}
                }
            }
        }
        search
    }

    /// Each state's layer: the longest path to it over the transitions that are not back edges.
    fn layers(&self, machine: &Machine) -> Vec<usize> {
        let mut layers = vec![0; machine.states.len()];
        for &state in self.postorder.iter().rev() {
            for (t, transition) in machine.transitions.iter().enumerate() {
                if transition.from == state && !self.back[t] {
                    layers[transition.to] = layers[transition.to].max(layers[state] + 1);
                }
            }
        }
        layers
    }
}

/// A slot's neighbours in the row above (or below), each with how strongly it pulls.
type Links = [Vec<(usize, f64)>];

/// Reorders each row by the mean position of its neighbours in the row before (sweeping down)
/// or after (sweeping up), keeping the order with the fewest crossings seen.
fn order_rows(rows: &mut Vec<Vec<usize>>, up: &Links, down: &Links) {
    let mut position = vec![0; up.len()];
    let renumber = |row: &[usize], position: &mut [usize]| {
        for (i, &slot) in row.iter().enumerate() {
            position[slot] = i;
        }
    };
    for row in rows.iter() {
        renumber(row, &mut position);
    }
    let mut best = (crossings(rows, down, &position), rows.clone());
    for _ in 0..ORDER_SWEEPS {
        let sweeps = (1..rows.len())
            .map(|r| (r, up))
            .chain((0..rows.len().saturating_sub(1)).rev().map(|r| (r, down)));
        for (r, neighbours) in sweeps {
            let mut keyed: Vec<(f64, usize)> = (rows[r].iter().enumerate())
                .map(|(i, &slot)| {
                    let around = neighbours[slot]
                        .iter()
                        .map(|&(n, pull)| (position[n] as f64, pull));
                    (weighted_mean(around).unwrap_or(i as f64), slot)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
            rows[r] = keyed.into_iter().map(|(_, slot)| slot).collect();
            renumber(&rows[r], &mut position);
        }
        let now = crossings(rows, down, &position);
        if now < best.0 {
            best = (now, rows.clone());
        }
    }
    *rows = best.1;
}

/// How many pairs of links between adjacent rows cross.
fn crossings(rows: &[Vec<usize>], down: &Links, position: &[usize]) -> usize {
    let mut count = 0;
    for row in rows {
        let links: Vec<(usize, usize)> = (row.iter())
            .flat_map(|&a| {
                down[a]
                    .iter()
                    .map(move |&(b, _)| (position[a], position[b]))
            })
            .collect();
        for (i, &(a1, b1)) in links.iter().enumerate() {
            count += links[i + 1..]
                .iter()
                .filter(|&&(a2, b2)| (a1 < a2 && b1 > b2) || (a1 > a2 && b1 < b2))
                .count();
        }
    }
    count
}

/// Horizontal centres: starting packed, each row in turn moves to where its links to the rows
/// above and below are shortest (least squares, weighted by pull) while keeping its order and
/// its gaps. Each move is exact for its row, so the rounds settle instead of drifting.
fn place(rows: &[Vec<usize>], up: &Links, down: &Links, widths: &[f64]) -> Vec<f64> {
    let gaps = |row: &[usize]| -> Vec<f64> {
        let mut gaps = vec![0.0];
        for pair in row.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let gap = if widths[a] > 0.0 && widths[b] > 0.0 {
                BOX_GAP
            } else {
                LANE_GAP
            };
            gaps.push((widths[a] + widths[b]) / 2.0 + gap);
        }
        gaps
    };
    let mut x = vec![0.0; widths.len()];
    for row in rows {
        let wanted = vec![(0.0, 1.0); row.len()];
        for (&slot, placed) in row.iter().zip(pack(&wanted, &gaps(row))) {
            x[slot] = placed;
        }
    }
    for round in 0..PLACE_ROUNDS {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..rows.len()).collect()
        } else {
            (0..rows.len()).rev().collect()
        };
        for r in order {
            let wanted: Vec<(f64, f64)> = (rows[r].iter())
                .map(|&slot| {
                    let around = up[slot]
                        .iter()
                        .chain(&down[slot])
                        .map(|&(n, pull)| (x[n], pull));
                    let pull = around.clone().map(|(_, pull)| pull).sum::<f64>();
                    // A slot with no links stays where it is, unless pushed.
                    weighted_mean(around).map_or((x[slot], 1e-3), |mean| (mean, pull))
                })
                .collect();
            for (&slot, placed) in rows[r].iter().zip(pack(&wanted, &gaps(&rows[r]))) {
                x[slot] = placed;
            }
        }
    }
    x
}

/// The mean of the values, each counted by its weight; none without values.
fn weighted_mean(values: impl Iterator<Item = (f64, f64)>) -> Option<f64> {
    let (sum, weight) = values.fold((0.0, 0.0), |(sum, weight), (value, w)| {
        (sum + value * w, weight + w)
    });
    (weight > 0.0).then(|| sum / weight)
}

/// The positions closest (least squares, each `(position, weight)` in `wanted` counted by its
/// weight) that keep at least `gaps[i]` between item `i - 1` and item `i`: isotonic
/// regression by pooling adjacent violators.
fn pack(wanted: &[(f64, f64)], gaps: &[f64]) -> Vec<f64> {
    let offsets: Vec<f64> = (gaps.iter())
        .scan(0.0, |sum, gap| {
            *sum += gap;
            Some(*sum)
        })
        .collect();
    // Runs of items pressed together, so sharing one position (less their offsets): the
    // weighted sum of their wishes, their weight and their count.
    let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
    for (&(position, weight), offset) in wanted.iter().zip(&offsets) {
        blocks.push(((position - offset) * weight, weight, 1));
        while let [.., (s1, w1, n1), (s2, w2, n2)] = blocks[..] {
            if s1 / w1 <= s2 / w2 {
                break;
            }
            blocks.truncate(blocks.len() - 2);
            blocks.push((s1 + s2, w1 + w2, n1 + n2));
        }
    }
    let shared = (blocks.iter()).flat_map(|&(sum, weight, n)| std::iter::repeat_n(sum / weight, n));
    shared
        .zip(&offsets)
        .map(|(base, offset)| base + offset)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn saga() -> Value {
        serde_json::from_str(workflow::definition::TEMPLATE).expect("the saga definition is JSON")
    }

    /// The layer `name` is drawn in, counted from the top.
    fn layer(graph: &Graph, name: &str) -> usize {
        let state = graph.states.iter().find(|state| state.name == name);
        let y = state.unwrap_or_else(|| panic!("{name} is laid out")).y;
        ((y - MARGIN) / (BOX_HEIGHT + ROW_GAP)).round() as usize
    }

    /// Each state group's name (from its title) and classes.
    fn groups(svg: &str) -> Vec<(String, Vec<String>)> {
        svg.split(r#"<g class="state "#)
            .skip(1)
            .map(|group| {
                let classes = group[..group.find('"').unwrap()].split(' ');
                let title = &group[group.find("<title>").unwrap() + 7..];
                let name = title[..title.find(" (").unwrap()].to_owned();
                (
                    name,
                    std::iter::once("state")
                        .chain(classes)
                        .map(str::to_owned)
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn saga_starts_alone_ends_cancelled_and_every_transition_goes_down() {
        let definition = saga();
        let graph = Graph::layout(&definition).unwrap();
        let first: Vec<&str> = graph
            .states()
            .filter(|name| layer(&graph, name) == 0)
            .collect();
        assert_eq!(first, ["ReserveInventory"]);
        let last = graph
            .states()
            .map(|name| layer(&graph, name))
            .max()
            .unwrap();
        assert_eq!(layer(&graph, "OrderCancelled"), last);
        let mut checked = 0;
        for (name, state) in definition["States"].as_object().unwrap() {
            for (target, _) in targets(state) {
                assert!(
                    layer(&graph, name) < layer(&graph, target),
                    "{name} → {target} goes down"
                );
                checked += 1;
            }
        }
        assert!(checked >= 12, "checked {checked} transitions");
    }

    #[test]
    fn states_come_row_by_row_once_each() {
        let graph = Graph::layout(&saga()).unwrap();
        let names: Vec<&str> = graph.states().collect();
        assert_eq!(names.len(), 10);
        assert_eq!(names.iter().collect::<HashSet<_>>().len(), 10);
        assert_eq!(names[0], "ReserveInventory");
        assert!(graph.states.windows(2).all(|pair| pair[0].y <= pair[1].y));
    }

    #[test]
    fn boxes_in_a_row_leave_room_between_them() {
        let graph = Graph::layout(&saga()).unwrap();
        assert!(graph.box_width >= "ApprovalWindowClosed".len() as f64 * CHAR_WIDTH);
        for pair in graph
            .states
            .windows(2)
            .filter(|pair| pair[0].y == pair[1].y)
        {
            assert!(pair[1].x - pair[0].x >= graph.box_width + BOX_GAP - 0.01);
        }
        for state in &graph.states {
            assert!(state.x - graph.box_width / 2.0 >= MARGIN - 0.01);
            assert!(state.x + graph.box_width / 2.0 <= graph.width - MARGIN + 0.01);
        }
    }

    #[test]
    fn arrows_end_on_the_edge_of_their_target_box() {
        let graph = Graph::layout(&saga()).unwrap();
        for route in &graph.routes {
            let Shape::Through(points) = &route.shape else {
                panic!("the saga has no loops")
            };
            let (x, y) = points[points.len() - 1];
            let target = graph
                .states
                .iter()
                .find(|s| s.y == y && (s.x - x).abs() <= graph.box_width / 2.0);
            assert!(
                target.is_some(),
                "an arrow ends at ({x}, {y}), on the top of a box"
            );
        }
    }

    #[test]
    fn marks_exactly_the_visited_states_and_the_current_one() {
        let graph = Graph::layout(&saga()).unwrap();
        let visited: HashSet<String> = [
            "ReserveInventory",
            "ChargePayment",
            "NeedsApproval",
            "AwaitApproval",
        ]
        .map(String::from)
        .into();
        let svg = graph.svg(&visited, Some("AwaitApproval"));
        let groups = groups(&svg);
        assert_eq!(groups.len(), 10);
        let marked: HashSet<String> = groups
            .iter()
            .filter(|(_, c)| c.iter().any(|c| c == "visited"))
            .map(|(n, _)| n.clone())
            .collect();
        assert_eq!(marked, visited);
        let current: Vec<&str> = groups
            .iter()
            .filter(|(_, c)| c.iter().any(|c| c == "current"))
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(current, ["AwaitApproval"]);
        let kinds = |kind: &str| {
            groups
                .iter()
                .filter(|(_, c)| c.iter().any(|c| c == kind))
                .count()
        };
        assert_eq!(
            (
                kinds("state-task"),
                kinds("state-choice"),
                kinds("state-pass")
            ),
            (6, 1, 1)
        );
        assert_eq!((kinds("state-succeed"), kinds("state-fail")), (1, 1));
        assert!(svg.contains("The order saga: 10 states; in AwaitApproval</title>"));
        assert!(svg.contains(
            "Passed through: ReserveInventory, ChargePayment, NeedsApproval, AwaitApproval."
        ));
        assert_eq!(
            svg.matches(r#"class="edge edge-catch""#).count(),
            1 + 5,
            "the key's and the saga's"
        );
    }

    #[test]
    fn draws_nothing_as_visited_for_an_order_not_started() {
        let graph = Graph::layout(&saga()).unwrap();
        let svg = graph.svg(&HashSet::new(), None);
        let marked = groups(&svg).into_iter().filter(|(_, classes)| {
            classes
                .iter()
                .any(|class| class == "visited" || class == "current")
        });
        assert_eq!(marked.count(), 0);
        assert!(svg.contains("<title id=\"saga-graph-title\">The order saga: 10 states</title>"));
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"));
    }

    #[test]
    fn escapes_state_names_from_the_definition() {
        let definition = json!({
            "StartAt": "<b>&\"",
            "States": {
                "<b>&\"": { "Type": "Pass", "Next": "it's done" },
                "it's done": { "Type": "Succeed" }
            }
        });
        let graph = Graph::layout(&definition).unwrap();
        let name = "<b>&\"".to_owned();
        let svg = graph.svg(&HashSet::from([name]), Some("<b>&\""));
        assert!(!svg.contains("<b>"));
        assert!(!svg.contains("it's"));
        assert!(svg.contains("&lt;b&gt;&amp;&quot;"));
        assert!(svg.contains("it&#39;s done"));
    }

    #[test]
    fn lays_out_a_cycle_without_hanging() {
        let definition = json!({
            "StartAt": "Poll",
            "States": {
                "Poll": { "Type": "Task", "Resource": "r", "Next": "Ready?" },
                "Ready?": { "Type": "Choice", "Choices": [{ "Next": "Done" }], "Default": "Wait" },
                "Wait": { "Type": "Wait", "Seconds": 5, "Next": "Poll" },
                "Again": { "Type": "Pass", "Next": "Again" },
                "Done": { "Type": "Succeed" }
            }
        });
        let graph = Graph::layout(&definition).unwrap();
        assert_eq!(
            (
                layer(&graph, "Poll"),
                layer(&graph, "Ready?"),
                layer(&graph, "Wait")
            ),
            (0, 1, 2)
        );
        assert_eq!(graph.states().count(), 5);
        let poll = graph.states.iter().find(|s| s.name == "Poll").unwrap();
        let ends = graph.routes.iter().filter_map(|route| match &route.shape {
            Shape::Through(points) => points.last().copied(),
            Shape::Loop(_) => None,
        });
        assert!(
            ends.into_iter().any(|(_, y)| y == poll.y + BOX_HEIGHT),
            "Wait → Poll points up, at the bottom of Poll"
        );
        let svg = graph.svg(&HashSet::new(), Some("Wait"));
        assert_eq!(
            svg.matches("marker-end").count(),
            5 + 2,
            "four transitions, a loop and the key"
        );
    }

    #[test]
    fn rejects_a_definition_without_start_at() {
        let definition = json!({ "States": { "Done": { "Type": "Succeed" } } });
        assert_eq!(
            Graph::layout(&definition).unwrap_err(),
            LayoutError::NoStartAt
        );
        assert_eq!(
            Graph::layout(&json!([])).unwrap_err(),
            LayoutError::NotAnObject
        );
        assert_eq!(
            Graph::layout(&json!({ "StartAt": "Done" })).unwrap_err(),
            LayoutError::NoStates
        );
    }

    #[test]
    fn rejects_a_transition_to_a_missing_state() {
        let definition =
            json!({ "StartAt": "A", "States": { "A": { "Type": "Pass", "Next": "B" } } });
        let error = Graph::layout(&definition).unwrap_err();
        assert_eq!(
            error,
            LayoutError::UnknownState {
                named_by: "A".into(),
                name: "B".into()
            }
        );
    }
}
