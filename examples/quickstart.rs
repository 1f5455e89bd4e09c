use structlearn::oracle_config::builtin_oracle;
use structlearn::{ConfusionMatrix, PredictOptions, TrainConfig, Trainer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 8 + 8 noisy 50×50 binary images (NIPS 2013 §5.1, smaller).
    let config =
        datasets::denoising::DenoisingConfig { height: 50, width: 50, train: 8, test: 8, ..Default::default() };
    let data = datasets::denoising::generate(&config)?;
    let oracles =
        vec![("unary".to_string(), builtin_oracle("boosting")?), ("pairwise".to_string(), builtin_oracle("linear")?)];
    let train = TrainConfig { learning_iterations: 5, ..TrainConfig::default() };
    let outcome = Trainer::new(&data.train, oracles, train)?.train()?;
    let predictions = outcome.model.predict(&data.test, &PredictOptions::default())?;
    let metrics = ConfusionMatrix::from_predictions(&data.test, &predictions)?;
    println!("test error {:.3}, mean IoU {:.3}", metrics.error_rate(), metrics.mean_iou().unwrap_or(0.0));
    Ok(())
}
