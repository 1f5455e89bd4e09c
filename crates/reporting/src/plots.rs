//! Figures as pure functions from plain data to PNG files: the learning curve
//! of `structlearn train --curve-png`, and the figures of `cargo xtask
//! reproduce` (NIPS 2013 Figs. 1–3).
//!
//! Figures are drawn with plotters into an in-memory RGB buffer and encoded
//! with the workspace's `image` crate, written atomically
//! ([`datasets::image::write_png`]). Text uses an embedded subset of DejaVu
//! Sans (`assets/fonts` of this crate, licence beside it) registered with plotters'
//! `ab_glyph` renderer, so no system font and no download is needed.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, ensure};
use datasets::{LabelPalette, Raster};
use image::{DynamicImage, RgbImage};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// DejaVu Sans reduced to ASCII, Latin-1, Greek and a few maths signs.
static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans-subset.ttf");

/// Family name under which the font is registered (plotters' default family).
const FAMILY: &str = "sans-serif";

/// Largest figure side in pixels; larger requests are refused rather than
/// allocating gigabytes.
const MAX_SIDE: u32 = 16_384;

/// Colours of the curves of one panel, in series order.
const SERIES_COLORS: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(214, 39, 40), RGBColor(44, 160, 44), RGBColor(255, 127, 14)];

/// The colour of the error curves.
const CURVE_COLOR: RGBColor = RGBColor(31, 119, 180);

/// Train and test error of one (unary class, pairwise class) run, as
/// `(learning iteration, error)` points.
///
/// ```
/// let curve = reporting::plots::CurveData {
///     train: vec![(1.0, 0.3), (2.0, 0.2)],
///     test: vec![(1.0, 0.32), (2.0, 0.25)],
/// };
/// let dir = tempfile::tempdir().unwrap();
/// let objective = [(0.5, 100.0), (1.0, 80.0), (1.5, 75.0), (2.0, 70.0)];
/// reporting::plots::plot_learning_curve(&dir.path().join("curve.png"), "my run", &objective, &curve).unwrap();
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CurveData {
    /// Training error per learning iteration (drawn dashed).
    pub train: Vec<(f64, f64)>,
    /// Test error per learning iteration (drawn solid).
    pub test: Vec<(f64, f64)>,
}

/// An image of [`plot_predictions`].
///
/// ```
/// use datasets::{LabelPalette, Raster};
/// use reporting::plots::{PlotImage, plot_predictions};
/// let noisy = Raster::new(2, 2, vec![0.1, 0.9, 0.8, 0.2]).unwrap();
/// let labels = Raster::new(2, 2, vec![0, 1, 1, 0]).unwrap();
/// let row = vec![PlotImage::Gray(noisy), PlotImage::Labels(labels, LabelPalette::binary())];
/// let dir = tempfile::tempdir().unwrap();
/// plot_predictions(&dir.path().join("p.png"), &["Input".into(), "Prediction".into()], &[row]).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum PlotImage {
    /// Gray values, `0` black … `1` white (clamped), e.g. the noisy input.
    Gray(Raster<f64>),
    /// A label map painted with a palette ([`LabelPalette::binary`]: 0 black, 1 white).
    Labels(Raster<usize>, LabelPalette),
    /// A colour image, e.g. a photograph.
    Rgb(RgbImage),
}

impl PlotImage {
    fn to_rgb(&self) -> Result<RgbImage> {
        Ok(match self {
            PlotImage::Gray(r) => DynamicImage::ImageLuma8(datasets::image::raster_to_gray(r, 0.0, 1.0)?).to_rgb8(),
            PlotImage::Labels(labels, palette) => palette.to_image(labels)?,
            PlotImage::Rgb(img) => img.clone(),
        })
    }
}

fn register_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    ensure!(ok, "the embedded font could not be parsed");
    Ok(())
}

fn figure_size(width: usize, height: usize) -> Result<(u32, u32)> {
    match (u32::try_from(width), u32::try_from(height)) {
        (Ok(w), Ok(h)) if (1..=MAX_SIDE).contains(&w) && (1..=MAX_SIDE).contains(&h) => Ok((w, h)),
        _ => Err(anyhow!("a {width}×{height} figure is outside the supported 1..={MAX_SIDE} pixels per side")),
    }
}

/// Draws onto a white (or pre-filled) RGB canvas and writes it as PNG.
fn render<F>(path: &Path, (w, h): (u32, u32), mut buf: Vec<u8>, draw: F) -> Result<()>
where
    F: FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Result<()>,
{
    register_font()?;
    let expected = w as usize * h as usize * 3;
    if buf.is_empty() {
        buf = vec![255; expected];
    }
    ensure!(buf.len() == expected, "canvas buffer holds {} bytes, expected {expected}", buf.len());
    {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        draw(&root)?;
        root.present()?;
    }
    let img = RgbImage::from_raw(w, h, buf).context("canvas buffer does not match the figure size")?;
    datasets::image::write_png(path, &DynamicImage::ImageRgb8(img))
        .with_context(|| format!("writing figure {}", path.display()))
}

fn text_style(size: f64, pos: Pos) -> TextStyle<'static> {
    TextStyle::from((FAMILY, size).into_font()).pos(pos)
}

fn centred(size: f64) -> TextStyle<'static> {
    text_style(size, Pos::new(HPos::Center, VPos::Center))
}

/// A value range covering `values` (finite ones) with a margin, never empty.
fn padded_range(values: impl Iterator<Item = f64>, pad: f64) -> Option<(f64, f64)> {
    let (lo, hi) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return None;
    }
    let span = hi - lo;
    Some(if span > 0.0 { (lo - pad * span, hi + pad * span) } else { (lo - 0.5, hi + 0.5) })
}

fn finite_points(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect()
}

/// Fig. 2: a grid of panels, `rows` = unary function classes, `cols` =
/// pairwise classes; panel `(r, c)` shows `cells[r][c]`'s train error
/// (dashed) and test error (solid) against the learning iteration, with the
/// last test error printed in its corner. All panels share their axes; an
/// empty cell is drawn as "no data".
///
/// ```
/// use reporting::plots::{CurveData, plot_error_curves};
/// let cell = CurveData { train: vec![(1.0, 0.2), (2.0, 0.1)], test: vec![(1.0, 0.25), (2.0, 0.15)] };
/// let names = vec!["Linear".to_string()];
/// let dir = tempfile::tempdir().unwrap();
/// plot_error_curves(&dir.path().join("fig2.png"), &names, &names, &[vec![cell]]).unwrap();
/// ```
pub fn plot_error_curves(path: &Path, rows: &[String], cols: &[String], cells: &[Vec<CurveData>]) -> Result<()> {
    ensure!(!rows.is_empty() && !cols.is_empty(), "an error-curve grid needs at least one row and one column");
    ensure!(cells.len() == rows.len(), "{} rows of cells for {} row names", cells.len(), rows.len());
    for (r, row) in cells.iter().enumerate() {
        ensure!(row.len() == cols.len(), "row {r} ({}) has {} cells for {} columns", rows[r], row.len(), cols.len());
    }
    let all = || cells.iter().flatten().flat_map(|c| c.train.iter().chain(&c.test));
    let (x0, x1) = padded_range(all().map(|p| p.0), 0.0).unwrap_or((0.0, 1.0));
    let y1 = padded_range(all().map(|p| p.1), 0.0).map_or(1.0, |(_, hi)| hi.max(0.0) * 1.08).max(0.05);

    let (panel_w, panel_h, left, top, bottom) = (250usize, 190usize, 120usize, 80usize, 40usize);
    let size = figure_size(left + cols.len() * panel_w + 15, top + rows.len() * panel_h + bottom)?;
    render(path, size, Vec::new(), |root| {
        root.fill(&WHITE)?;
        let (w, h) = (size.0 as i32, size.1 as i32);
        let title = "Univariate (rows) × pairwise (columns) function classes: error vs learning iteration";
        root.draw(&Text::new(title, (w / 2, 18), centred(20.0)))?;
        let grid_w = (cols.len() * panel_w) as i32;
        for (c, name) in cols.iter().enumerate() {
            let x = left as i32 + c as i32 * panel_w as i32 + panel_w as i32 / 2;
            root.draw(&Text::new(name.as_str(), (x, top as i32 - 22), centred(18.0)))?;
        }
        for (r, name) in rows.iter().enumerate() {
            let y = top as i32 + r as i32 * panel_h as i32 + panel_h as i32 / 2;
            root.draw(&Text::new(name.as_str(), (12, y), text_style(18.0, Pos::new(HPos::Left, VPos::Center))))?;
        }
        let legend_y = h - bottom as i32 / 2;
        let lx = left as i32 + grid_w / 2 - 150;
        for dash in 0..4 {
            let x = lx + dash * 10;
            root.draw(&PathElement::new(vec![(x, legend_y), (x + 6, legend_y)], CURVE_COLOR.stroke_width(2)))?;
        }
        root.draw(&Text::new("train", (lx + 48, legend_y), text_style(16.0, Pos::new(HPos::Left, VPos::Center))))?;
        root.draw(&PathElement::new(vec![(lx + 150, legend_y), (lx + 190, legend_y)], CURVE_COLOR.stroke_width(2)))?;
        root.draw(&Text::new("test", (lx + 198, legend_y), text_style(16.0, Pos::new(HPos::Left, VPos::Center))))?;

        let grid = root.margin(top as u32, bottom as u32, left as u32, (w - left as i32 - grid_w).max(0) as u32);
        let panels = grid.split_evenly((rows.len(), cols.len()));
        for (panel, cell) in panels.iter().zip(cells.iter().flatten()) {
            let mut chart = ChartBuilder::on(panel)
                .margin(6)
                .x_label_area_size(22)
                .y_label_area_size(38)
                .build_cartesian_2d(x0..x1, 0.0..y1)?;
            chart
                .configure_mesh()
                .x_labels(5)
                .y_labels(5)
                .light_line_style(WHITE)
                .label_style((FAMILY, 11))
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| format!("{v:.2}"))
                .draw()?;
            let train = finite_points(&cell.train);
            let test = finite_points(&cell.test);
            if train.is_empty() && test.is_empty() {
                let (pw, ph) = panel.dim_in_pixel();
                panel.draw(&Text::new("no data", (pw as i32 / 2 + 16, ph as i32 / 2), centred(14.0)))?;
                continue;
            }
            chart.draw_series(DashedLineSeries::new(train, 6, 4, CURVE_COLOR.stroke_width(2)))?;
            chart.draw_series(LineSeries::new(test.iter().copied(), CURVE_COLOR.stroke_width(2)))?;
            if let Some(&(_, last)) = test.last() {
                let (pw, _) = panel.dim_in_pixel();
                let style = text_style(13.0, Pos::new(HPos::Right, VPos::Top));
                panel.draw(&Text::new(format!("test {last:.3}"), (pw as i32 - 12, 10), style))?;
            }
        }
        Ok(())
    })
}

/// Fig. 1: the learned energies as functions of the single non-constant
/// feature, one column per function class. Top row: `unary[c]` holds points
/// `(φ, [u(φ, 0), u(φ, 1)])`; bottom row: `pairwise[c]` holds
/// `(φ, [v(φ, 00), v(φ, 01), v(φ, 10), v(φ, 11)])`. Each panel has its own
/// value range.
///
/// ```
/// let xs = [0.0, 0.5, 1.0];
/// let unary = vec![xs.iter().map(|&x| (x, [-x, x])).collect()];
/// let pairwise = vec![xs.iter().map(|&x| (x, [1.0 - x, x, x, 1.0 - x])).collect()];
/// let dir = tempfile::tempdir().unwrap();
/// reporting::plots::plot_learned_functions(&dir.path().join("fig1.png"), &["Linear".into()], &unary, &pairwise).unwrap();
/// ```
pub fn plot_learned_functions(
    path: &Path,
    classes: &[String],
    unary: &[Vec<(f64, [f64; 2])>],
    pairwise: &[Vec<(f64, [f64; 4])>],
) -> Result<()> {
    ensure!(!classes.is_empty(), "no function classes to plot");
    ensure!(unary.len() == classes.len(), "{} unary curves for {} classes", unary.len(), classes.len());
    ensure!(pairwise.len() == classes.len(), "{} pairwise curves for {} classes", pairwise.len(), classes.len());
    let (panel_w, panel_h, left, top) = (280usize, 250usize, 90usize, 70usize);
    let size = figure_size(left + classes.len() * panel_w + 15, top + 2 * panel_h + 10)?;
    let unary_rows: Vec<Vec<(f64, Vec<f64>)>> =
        unary.iter().map(|pts| pts.iter().map(|(x, v)| (*x, v.to_vec())).collect()).collect();
    let pair_rows: Vec<Vec<(f64, Vec<f64>)>> =
        pairwise.iter().map(|pts| pts.iter().map(|(x, v)| (*x, v.to_vec())).collect()).collect();
    render(path, size, Vec::new(), |root| {
        root.fill(&WHITE)?;
        let w = size.0 as i32;
        root.draw(&Text::new("Learned energy functions", (w / 2, 18), centred(20.0)))?;
        for (c, name) in classes.iter().enumerate() {
            let x = left as i32 + c as i32 * panel_w as i32 + panel_w as i32 / 2;
            root.draw(&Text::new(name.as_str(), (x, top as i32 - 20), centred(18.0)))?;
        }
        let row_label = text_style(16.0, Pos::new(HPos::Left, VPos::Center));
        let y_of = |r: i32| top as i32 + r * panel_h as i32 + panel_h as i32 / 2;
        root.draw(&Text::new("u(φ, y)", (8, y_of(0)), row_label.clone()))?;
        root.draw(&Text::new("v(φ, y_i y_j)", (8, y_of(1)), row_label))?;

        let grid_w = (classes.len() * panel_w) as i32;
        let grid = root.margin(top as u32, 10, left as u32, (w - left as i32 - grid_w).max(0) as u32);
        let panels = grid.split_evenly((2, classes.len()));
        let (top_panels, bottom_panels) = panels.split_at(classes.len());
        let unary_names = ["y = 0", "y = 1"];
        let pair_names = ["00", "01", "10", "11"];
        for (c, panel) in top_panels.iter().enumerate() {
            function_panel(panel, &unary_rows[c], &unary_names, c == 0)?;
        }
        for (c, panel) in bottom_panels.iter().enumerate() {
            function_panel(panel, &pair_rows[c], &pair_names, c == 0)?;
        }
        Ok(())
    })
}

/// One panel of Fig. 1: `names.len()` curves over a shared x axis.
fn function_panel(
    panel: &DrawingArea<BitMapBackend<'_>, Shift>,
    points: &[(f64, Vec<f64>)],
    names: &[&str],
    legend: bool,
) -> Result<()> {
    let (x0, x1) = padded_range(points.iter().map(|p| p.0), 0.0).unwrap_or((0.0, 1.0));
    let (y0, y1) = padded_range(points.iter().flat_map(|p| p.1.iter().copied()), 0.06).unwrap_or((-1.0, 1.0));
    let mut chart = ChartBuilder::on(panel)
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(44)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_labels(5)
        .y_labels(5)
        .light_line_style(WHITE)
        .label_style((FAMILY, 11))
        .x_desc("φ")
        .axis_desc_style((FAMILY, 12))
        .x_label_formatter(&|v| format!("{v:.1}"))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .draw()?;
    if points.is_empty() {
        let (pw, ph) = panel.dim_in_pixel();
        panel.draw(&Text::new("no data", (pw as i32 / 2 + 20, ph as i32 / 2), centred(14.0)))?;
        return Ok(());
    }
    for (k, name) in names.iter().enumerate() {
        let color = SERIES_COLORS[k % SERIES_COLORS.len()];
        let series: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|(x, v)| v.get(k).map(|&y| (*x, y)))
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        chart
            .draw_series(LineSeries::new(series, color.stroke_width(2)))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    if legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font((FAMILY, 12))
            .draw()?;
    }
    Ok(())
}

/// Fig. 3: a grid of images, one row per test image, one column per entry of
/// `columns` (e.g. Input, True, Linear, Boosting, MLP). Images are scaled up
/// by a whole factor (nearest neighbour) to about 200 pixels and centred in
/// their cell, each with a thin gray frame.
///
/// ```
/// use datasets::{LabelPalette, Raster};
/// use reporting::plots::{PlotImage, plot_predictions};
/// let truth = Raster::new(3, 3, vec![0, 1, 0, 1, 1, 1, 0, 1, 0]).unwrap();
/// let rows = vec![vec![PlotImage::Labels(truth.clone(), LabelPalette::binary()), PlotImage::Labels(truth, LabelPalette::binary())]];
/// let dir = tempfile::tempdir().unwrap();
/// plot_predictions(&dir.path().join("fig3.png"), &["True".into(), "Predicted".into()], &rows).unwrap();
/// ```
pub fn plot_predictions(path: &Path, columns: &[String], images: &[Vec<PlotImage>]) -> Result<()> {
    plot_predictions_with_legend(path, columns, images, &[])
}

/// [`plot_predictions`] with a row of colour swatches and class names below
/// the images (nothing when `legend` is empty).
pub fn plot_predictions_with_legend(
    path: &Path,
    columns: &[String],
    images: &[Vec<PlotImage>],
    legend: &[(String, [u8; 3])],
) -> Result<()> {
    ensure!(!columns.is_empty() && !images.is_empty(), "a prediction grid needs at least one row and column");
    let rgb: Vec<Vec<RgbImage>> = images
        .iter()
        .enumerate()
        .map(|(r, row)| {
            ensure!(row.len() == columns.len(), "image row {r} has {} images for {} columns", row.len(), columns.len());
            row.iter().map(PlotImage::to_rgb).collect::<Result<Vec<_>>>()
        })
        .collect::<Result<_>>()?;
    let max_w = rgb.iter().flatten().map(|i| i.width() as usize).max().unwrap_or(1);
    let max_h = rgb.iter().flatten().map(|i| i.height() as usize).max().unwrap_or(1);
    let scale = (200 / max_w.max(max_h)).max(1);
    let (cell_w, cell_h, gap, top) = (max_w * scale, max_h * scale, 10usize, 40usize);
    let (swatch, entry_w) = (16usize, 130usize);
    let width = (gap + columns.len() * (cell_w + gap)).max(gap + entry_w * legend.len().min(8));
    let legend_rows = legend.len().div_ceil(8);
    let legend_top = top + images.len() * (cell_h + gap);
    let height = legend_top + legend_rows * (swatch + gap) + if legend.is_empty() { 0 } else { gap };
    let size = figure_size(width, height)?;

    let mut buf = vec![255u8; width * height * 3];
    let mut frames = Vec::new();
    for (r, row) in rgb.iter().enumerate() {
        for (c, img) in row.iter().enumerate() {
            let (iw, ih) = (img.width() as usize * scale, img.height() as usize * scale);
            let x0 = gap + c * (cell_w + gap) + (cell_w - iw) / 2;
            let y0 = top + r * (cell_h + gap) + (cell_h - ih) / 2;
            frames.push([(x0 as i32 - 1, y0 as i32 - 1), ((x0 + iw) as i32, (y0 + ih) as i32)]);
            for y in 0..ih {
                for x in 0..iw {
                    let p = img.get_pixel((x / scale) as u32, (y / scale) as u32).0;
                    let at = ((y0 + y) * width + x0 + x) * 3;
                    buf[at..at + 3].copy_from_slice(&p);
                }
            }
        }
    }
    render(path, size, buf, |root| {
        // A thin frame keeps white regions of an image apart from the page.
        for corners in frames {
            root.draw(&Rectangle::new(corners, RGBColor(150, 150, 150).stroke_width(1)))?;
        }
        for (c, name) in columns.iter().enumerate() {
            let x = gap + c * (cell_w + gap) + cell_w / 2;
            root.draw(&Text::new(name.as_str(), (x as i32, top as i32 / 2), centred(18.0)))?;
        }
        for (k, (name, [r, g, b])) in legend.iter().enumerate() {
            let x = (gap + (k % 8) * entry_w) as i32;
            let y = (legend_top + (k / 8) * (swatch + gap)) as i32;
            let s = swatch as i32;
            root.draw(&Rectangle::new([(x, y), (x + s, y + s)], RGBColor(*r, *g, *b).filled()))?;
            root.draw(&Rectangle::new([(x, y), (x + s, y + s)], RGBColor(90, 90, 90).stroke_width(1)))?;
            let style = text_style(14.0, Pos::new(HPos::Left, VPos::Center));
            root.draw(&Text::new(name.as_str(), (x + s + 5, y + s / 2), style))?;
        }
        Ok(())
    })
}

/// The learning curve of one training run: the objective `R` after every
/// step (left panel, against fractional learning iterations) and the train
/// (dashed) / validation (solid) error after every evaluation (right panel).
/// Empty series are drawn as "no data".
///
/// ```
/// use reporting::plots::{CurveData, plot_learning_curve};
/// let dir = tempfile::tempdir().unwrap();
/// plot_learning_curve(&dir.path().join("c.png"), "objective only", &[(1.0, 10.0), (2.0, 9.0)], &CurveData::default()).unwrap();
/// ```
pub fn plot_learning_curve(path: &Path, title: &str, objective: &[(f64, f64)], errors: &CurveData) -> Result<()> {
    let (panel_w, panel_h, top) = (460u32, 340u32, 50u32);
    let size = figure_size(2 * panel_w as usize, (top + panel_h) as usize)?;
    render(path, size, Vec::new(), |root| {
        root.fill(&WHITE)?;
        root.draw(&Text::new(title, (size.0 as i32 / 2, 18), centred(18.0)))?;
        let body = root.margin(top, 0, 0, 0);
        let panels = body.split_evenly((1, 2));
        let objective = finite_points(objective);
        let (x0, x1) = padded_range(objective.iter().map(|p| p.0), 0.0).unwrap_or((0.0, 1.0));
        let (y0, y1) = padded_range(objective.iter().map(|p| p.1), 0.05).unwrap_or((0.0, 1.0));
        let mut chart = ChartBuilder::on(&panels[0])
            .caption("objective R", (FAMILY, 15))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .label_style((FAMILY, 11))
            .x_desc("learning iteration")
            .axis_desc_style((FAMILY, 12))
            .y_label_formatter(&|v| format!("{v:.3e}"))
            .draw()?;
        chart.draw_series(LineSeries::new(objective.iter().copied(), SERIES_COLORS[0].stroke_width(2)))?;

        let train = finite_points(&errors.train);
        let test = finite_points(&errors.test);
        let all = || train.iter().chain(&test);
        let (ex0, ex1) = padded_range(all().map(|p| p.0), 0.0).unwrap_or((0.0, 1.0));
        let ey1 = padded_range(all().map(|p| p.1), 0.0).map_or(1.0, |(_, hi)| hi.max(0.0) * 1.08).max(0.01);
        let mut chart = ChartBuilder::on(&panels[1])
            .caption("error (dashed: train, solid: validation)", (FAMILY, 15))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(50)
            .build_cartesian_2d(ex0..ex1, 0.0..ey1)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .label_style((FAMILY, 11))
            .x_desc("learning iteration")
            .axis_desc_style((FAMILY, 12))
            .y_label_formatter(&|v| format!("{v:.3}"))
            .draw()?;
        if train.is_empty() && test.is_empty() {
            let (pw, ph) = panels[1].dim_in_pixel();
            panels[1].draw(&Text::new("no data", (pw as i32 / 2, ph as i32 / 2), centred(14.0)))?;
        }
        chart.draw_series(DashedLineSeries::new(train, 6, 4, CURVE_COLOR.stroke_width(2)))?;
        chart.draw_series(LineSeries::new(test.iter().copied(), SERIES_COLORS[1].stroke_width(2)))?;
        if objective.is_empty() {
            let (pw, ph) = panels[0].dim_in_pixel();
            panels[0].draw(&Text::new("no data", (pw as i32 / 2, ph as i32 / 2), centred(14.0)))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A fresh folder under the system temp folder (xtask has no tempfile
    /// dependency), removed when dropped.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("xtask-plots-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn decoded_size(path: &Path) -> (u32, u32) {
        let img = datasets::image::load_image(path).unwrap();
        (img.width(), img.height())
    }

    #[test]
    fn error_curve_grid_renders() {
        let dir = TempDir::new("fig2");
        let classes = names(&["Zero", "Const.", "Linear", "Boost.", "MLP"]);
        let cells: Vec<Vec<CurveData>> = (0..5)
            .map(|r| {
                (0..5)
                    .map(|c| {
                        if r == 0 && c == 4 {
                            return CurveData::default();
                        }
                        let floor = 0.02 * (5 - r.min(c)) as f64;
                        let curve = |off: f64| {
                            (0..=20).map(|t| (t as f64, floor + off + 0.45 * (-(t as f64) / 3.0).exp())).collect()
                        };
                        CurveData { train: curve(0.0), test: curve(0.01) }
                    })
                    .collect()
            })
            .collect();
        let path = dir.path().join("fig2.png");
        plot_error_curves(&path, &classes, &classes, &cells).unwrap();
        assert_eq!(decoded_size(&path), (120 + 5 * 250 + 15, 80 + 5 * 190 + 40));
        assert!(plot_error_curves(&path, &classes, &classes, &cells[..4]).is_err());
    }

    #[test]
    fn learning_curve_renders_with_and_without_errors() {
        let dir = TempDir::new("curve");
        let objective: Vec<(f64, f64)> = (1..=40).map(|s| (s as f64 / 4.0, 1e4 / s as f64)).collect();
        let errors = CurveData {
            train: (1..=10).map(|i| (i as f64, 0.3 / i as f64)).collect(),
            test: (1..=10).map(|i| (i as f64, 0.32 / i as f64)).collect(),
        };
        let path = dir.path().join("curve.png");
        plot_learning_curve(&path, "train", &objective, &errors).unwrap();
        assert_eq!(decoded_size(&path), (920, 390));
        plot_learning_curve(&path, "no evaluation", &objective, &CurveData::default()).unwrap();
        plot_learning_curve(&path, "nothing", &[], &CurveData::default()).unwrap();
    }

    #[test]
    fn learned_function_panels_render() {
        let dir = TempDir::new("fig1");
        let classes = names(&["Linear", "Boosting", "MLP"]);
        let xs = (0..=50).map(|i| f64::from(i) / 50.0);
        let unary: Vec<Vec<(f64, [f64; 2])>> =
            (0..3).map(|c| xs.clone().map(|x| (x, [-(c as f64 + 1.0) * x, (c as f64 + 1.0) * x])).collect()).collect();
        let pairwise: Vec<Vec<(f64, [f64; 4])>> =
            (0..3).map(|_| xs.clone().map(|x| (x, [1.0 - x, x - 0.5, x - 0.5, 1.0 - x])).collect()).collect();
        let path = dir.path().join("fig1.png");
        plot_learned_functions(&path, &classes, &unary, &pairwise).unwrap();
        assert_eq!(decoded_size(&path), (90 + 3 * 280 + 15, 70 + 2 * 250 + 10));
        assert!(plot_learned_functions(&path, &classes, &unary[..2], &pairwise).is_err());
    }

    #[test]
    fn prediction_grid_renders_images_in_place() {
        let dir = TempDir::new("fig3");
        let columns = names(&["Input", "True", "Linear", "Boosting", "MLP"]);
        let (h, w) = (40, 50);
        let gray = Raster::new(h, w, (0..h * w).map(|i| (i % w) as f64 / w as f64).collect()).unwrap();
        let labels = Raster::new(h, w, (0..h * w).map(|i| usize::from(i / w >= h / 2)).collect()).unwrap();
        let red = LabelPalette::new(vec![[200, 30, 30], [0, 0, 255]]).unwrap();
        let row = |_: usize| {
            let mut row = vec![PlotImage::Gray(gray.clone())];
            row.extend((0..3).map(|_| PlotImage::Labels(labels.clone(), LabelPalette::binary())));
            row.push(PlotImage::Labels(labels.clone(), red.clone()));
            row
        };
        let images: Vec<Vec<PlotImage>> = (0..3).map(row).collect();
        let path = dir.path().join("fig3.png");
        plot_predictions(&path, &columns, &images).unwrap();
        // 200 / 50 = 4× scaling: cells of 200 × 160, 10 px gaps, 40 px header.
        assert_eq!(decoded_size(&path), (10 + 5 * 210, 40 + 3 * 170));
        let img = datasets::image::load_rgb(&path).unwrap();
        // Column 1, row 0: top half label 0 (black), bottom half label 1 (white).
        assert_eq!(img.get_pixel(10 + 210 + 100, 40 + 40).0, [0, 0, 0]);
        assert_eq!(img.get_pixel(10 + 210 + 100, 40 + 120).0, [255, 255, 255]);
        assert_eq!(img.get_pixel(10 + 4 * 210 + 100, 40 + 2 * 170 + 40).0, [200, 30, 30]);
        let mut bad = images.clone();
        bad[1].pop();
        assert!(plot_predictions(&path, &columns, &bad).is_err());
    }
}

/// One curve of [`plot_lines`]: a name for the legend and its points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// `(x, y)` points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Dashed instead of solid.
    pub dashed: bool,
}

/// A line chart of several series on shared axes, with a legend: Punyakanok
/// et al.'s Fig. 2 (accuracy vs training examples, `log_x`) and the
/// wall-clock comparisons of the learners (objective or error vs seconds;
/// `log_y` for objectives spanning decades). Non-finite points (and, on a log
/// axis, non-positive ones) are skipped.
pub fn plot_lines(
    path: &Path,
    title: &str,
    (x_label, y_label): (&str, &str),
    (log_x, log_y): (bool, bool),
    series: &[Series],
) -> Result<()> {
    const PALETTE: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(23, 190, 207),
    ];
    let keep = |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite() && (!log_x || p.0 > 0.0) && (!log_y || p.1 > 0.0);
    let pts: Vec<Vec<(f64, f64)>> = series.iter().map(|s| s.points.iter().copied().filter(keep).collect()).collect();
    let all = || pts.iter().flatten();
    ensure!(all().next().is_some(), "{}: no finite points to plot", path.display());
    let tr = |v: f64, log: bool| if log { v.log10() } else { v };
    let (x0, x1) = padded_range(all().map(|p| tr(p.0, log_x)), 0.03).unwrap_or((0.0, 1.0));
    let (y0, y1) = padded_range(all().map(|p| tr(p.1, log_y)), 0.05).unwrap_or((0.0, 1.0));
    // The legend goes where the curves are not: up for falling curves, down for rising ones.
    let falling = pts.iter().find(|p| p.len() > 1).is_some_and(|p| p[p.len() - 1].1 < p[0].1);
    let legend = if falling { SeriesLabelPosition::UpperRight } else { SeriesLabelPosition::LowerRight };
    let size = figure_size(760, 520)?;
    render(path, size, Vec::new(), |root| {
        root.fill(&WHITE)?;
        root.draw(&Text::new(title, (size.0 as i32 / 2, 16), centred(18.0)))?;
        let area = root.margin(34, 8, 8, 16);
        let mut chart = ChartBuilder::on(&area)
            .margin(8)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        let fmt = |v: &f64, log: bool| {
            if log {
                let u = 10f64.powf(*v);
                if u >= 10.0 {
                    format!("{u:.0}")
                } else if u >= 1.0 {
                    format!("{u:.1}")
                } else {
                    format!("{u:.3}")
                }
            } else {
                format!("{v:.3}")
            }
        };
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15))
            .x_label_formatter(&|v| fmt(v, log_x))
            .y_label_formatter(&|v| fmt(v, log_y))
            .draw()?;
        for (i, (s, p)) in series.iter().zip(&pts).enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let p: Vec<(f64, f64)> = p.iter().map(|&(x, y)| (tr(x, log_x), tr(y, log_y))).collect();
            let style = color.stroke_width(2);
            let legend = move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 20, y)], style);
            if s.dashed {
                chart.draw_series(DashedLineSeries::new(p, 7, 4, style))?.label(s.name.as_str()).legend(legend);
            } else {
                chart.draw_series(LineSeries::new(p, style))?.label(s.name.as_str()).legend(legend);
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FAMILY, 13))
            .position(legend)
            .draw()?;
        Ok(())
    })
}
