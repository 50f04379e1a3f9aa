use super::*;

/// A tiny XML check: every tag is closed in order, attributes are quoted, text holds no raw `<`
/// or bare `&`. Returns the element names in document order.
pub(crate) fn well_formed(svg: &str) -> Result<Vec<String>, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut names = Vec::new();
    let mut rest = svg;
    while let Some(open) = rest.find('<') {
        check_text(&rest[..open])?;
        let close = rest[open..].find('>').ok_or("unterminated tag")? + open;
        let tag = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack.pop().ok_or(format!("</{name}> with nothing open"))?;
            if top != name.trim() {
                return Err(format!("</{name}> closes <{top}>"));
            }
            continue;
        }
        let self_closing = tag.ends_with('/');
        let body = tag.trim_end_matches('/');
        let name = body.split_whitespace().next().ok_or("empty tag")?.to_owned();
        if !body.matches('"').count().is_multiple_of(2) {
            return Err(format!("unbalanced quotes in <{body}>"));
        }
        if stack.is_empty() && !names.is_empty() {
            return Err(format!("<{name}> after the root element"));
        }
        names.push(name.clone());
        if !self_closing {
            stack.push(name);
        }
    }
    check_text(rest)?;
    match stack.pop() {
        Some(open) => Err(format!("<{open}> never closed")),
        None if names.first().map(String::as_str) == Some("svg") => Ok(names),
        None => Err("the root is not <svg>".into()),
    }
}

fn check_text(text: &str) -> Result<(), String> {
    for (i, _) in text.match_indices('&') {
        let entity = &text[i..];
        if !["&amp;", "&lt;", "&gt;", "&quot;"].iter().any(|e| entity.starts_with(e)) {
            return Err(format!("bare & in `{text}`"));
        }
    }
    Ok(())
}

fn chart(series: Vec<Series>) -> BarChart {
    BarChart {
        title: "t".into(),
        y_label: "µs".into(),
        groups: vec!["a".into(), "b".into()],
        series,
        reference: None,
        value_fmt: |v| format!("{v:.1}"),
        notes: vec![],
    }
}

/// The `height` of every `<rect>` with a `<title>` (the bars), in order.
pub(crate) fn bar_heights(svg: &str) -> Vec<f64> {
    svg.lines()
        .filter(|l| l.starts_with("<rect") && l.contains("<title>"))
        .map(|l| {
            let h = l.split("height=\"").nth(1).unwrap();
            h[..h.find('"').unwrap()].parse().unwrap()
        })
        .collect()
}

#[test]
fn the_checker_catches_broken_svg() {
    assert!(well_formed("<svg><g><rect/></g></svg>").is_ok());
    assert!(well_formed("<svg><g></svg>").is_err());
    assert!(well_formed("<svg><g>").is_err());
    assert!(well_formed(r#"<svg><rect x="1/></svg>"#).is_err());
    assert!(well_formed("<svg>a & b</svg>").is_err());
    assert!(well_formed("<svg></svg><svg></svg>").is_err());
    assert!(well_formed("<g></g>").is_err());
}

#[test]
fn nice_scales() {
    assert_eq!(Scale::new(17.0), Scale { top: 20.0, ticks: vec![0.0, 5.0, 10.0, 15.0, 20.0] });
    assert_eq!(Scale::new(1.23).top, 1.5);
    assert_eq!(Scale::new(0.8).top, 0.8);
    assert_eq!(Scale::new(950.0).top, 1000.0);
    assert_eq!(Scale::new(0.0).top, 1.0);
    assert_eq!(Scale::new(f64::NAN).top, 1.0);
    assert_eq!(Scale::new(20.0).px(10.0, 300.0), 150.0);
    assert_eq!(Scale::new(20.0).px(30.0, 300.0), 300.0);
}

#[test]
fn bars_are_scaled_to_the_axis() {
    let svg = bar_chart(&chart(vec![
        Series { name: "nginx".into(), values: vec![Some(10.0), Some(20.0)] },
        Series { name: "gateway-uring".into(), values: vec![Some(5.0), None] },
    ]));
    well_formed(&svg).unwrap();
    // 20 x HEADROOM = 22: the axis goes to 25.
    let px = |v: f64| (PLOT_H * v / 25.0 * 10.0).round() / 10.0;
    assert_eq!(bar_heights(&svg), [px(10.0), px(5.0), px(20.0)]);
    assert!(svg.contains(">20.0</text>"), "values printed on bars");
    assert!(svg.contains(r##"fill="#2ca02c""##) && svg.contains(r##"fill="#1f77b4""##));
    assert!(svg.contains(">–</text>"), "the missing bar is marked");
    assert!(svg.contains(">gateway-uring</text>"), "legend");
}

#[test]
fn the_reference_line_raises_the_scale() {
    let mut c = chart(vec![Series { name: "nginx".into(), values: vec![Some(0.5), Some(0.5)] }]);
    c.reference = Some((0.8, "target 0.8 & under".into()));
    let svg = bar_chart(&c);
    well_formed(&svg).unwrap();
    assert!(svg.contains("stroke-dasharray"));
    assert!(svg.contains("target 0.8 &amp; under"));
    // 0.8 x HEADROOM = 0.88: the axis goes to 1.0.
    assert_eq!(bar_heights(&svg), [(PLOT_H * 0.5 * 10.0).round() / 10.0; 2]);
}

#[test]
fn lines_and_empty_charts() {
    let c = LineChart {
        title: "p99 <vs> load".into(),
        x_label: "fraction".into(),
        y_label: "µs".into(),
        lines: vec![
            Line { name: "haproxy".into(), points: vec![(0.5, 100.0), (1.0, 400.0)] },
            Line { name: "x".into(), points: vec![] },
        ],
        x_fmt: |v| format!("{v:.1}"),
        notes: vec!["one".into(), "two".into()],
    };
    let svg = line_chart(&c);
    let names = well_formed(&svg).unwrap();
    assert_eq!(names.iter().filter(|n| *n == "polyline").count(), 2);
    assert!(svg.contains("p99 &lt;vs&gt; load") && svg.contains("Note: two"));
    assert!(svg.contains(r##"stroke="#d62728""##));
    let empty = no_data("cpu", "no h1-small.json");
    well_formed(&empty).unwrap();
    assert!(empty.contains("No data: no h1-small.json"));
    let no_series = bar_chart(&chart(vec![]));
    well_formed(&no_series).unwrap();
}

#[test]
fn colours_are_stable() {
    assert_eq!(colour("gateway-uring"), colour("gateway"));
    assert_ne!(colour("nginx"), colour("haproxy"));
    assert_eq!(colour("some-new-proxy"), colour("some-new-proxy"));
}
