package io.larkline.registry.configindex;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.jboss.jandex.AnnotationInstance;
import org.jboss.jandex.AnnotationValue;
import org.jboss.jandex.DotName;
import org.jboss.jandex.Type;

import apicurio.common.app.components.config.index.DynamicPropertiesInfoRecorder;
import io.apicurio.common.apps.config.Dynamic;
import io.apicurio.common.apps.config.DynamicConfigPropertyDef;
import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import io.quarkus.arc.deployment.BeanDiscoveryFinishedBuildItem;
import io.quarkus.arc.deployment.SyntheticBeanBuildItem;
import io.quarkus.arc.processor.InjectionPointInfo;
import io.quarkus.deployment.annotations.BuildProducer;
import io.quarkus.deployment.annotations.BuildStep;
import io.quarkus.deployment.annotations.ExecutionTime;
import io.quarkus.deployment.annotations.Record;

/**
 * Finds every injection point that carries both {@code @ConfigProperty} and
 * {@code @Dynamic} (a registry setting that can be changed at run time through the
 * admin API) and publishes their definitions as a {@link DynamicConfigPropertyList}
 * bean, which the registry uses to accept or refuse a dynamic setting.
 */
class ConfigIndexProcessor {
    private static final DotName CONFIG_PROPERTY = DotName.createSimple(ConfigProperty.class.getName());
    private static final DotName DYNAMIC = DotName.createSimple(Dynamic.class.getName());

    @BuildStep
    @Record(ExecutionTime.STATIC_INIT)
    void dynamicProperties(DynamicPropertiesInfoRecorder recorder, BeanDiscoveryFinishedBuildItem beans,
            BuildProducer<SyntheticBeanBuildItem> synthetic) throws ClassNotFoundException {
        List<DynamicConfigPropertyDef> defs = new ArrayList<>();
        for (InjectionPointInfo ip : beans.getInjectionPoints()) {
            AnnotationInstance cp = ip.getRequiredQualifier(CONFIG_PROPERTY);
            if (cp == null || !ip.isField()) {
                continue;
            }
            AnnotationInstance dyn = ip.getTarget().asField().annotation(DYNAMIC);
            if (dyn == null) {
                continue;
            }
            // A dynamic property is injected as Supplier<T>; T is the value's type.
            Type t = ip.getType();
            if (t.kind() == Type.Kind.PARAMETERIZED_TYPE && !t.asParameterizedType().arguments().isEmpty()) {
                t = t.asParameterizedType().arguments().get(0);
            }
            Class<?> type = Class.forName(t.name().toString(), false, Thread.currentThread().getContextClassLoader());
            AnnotationValue dv = cp.value("defaultValue");
            DynamicConfigPropertyDef def = new DynamicConfigPropertyDef(cp.value("name").asString(), type,
                    dv == null ? null : dv.asString());
            def.setLabel(stringOrNull(dyn.value("label")));
            def.setDescription(stringOrNull(dyn.value("description")));
            AnnotationValue req = dyn.value("requires");
            def.setRequires(req == null ? new String[0] : Arrays.copyOf(req.asStringArray(), req.asStringArray().length));
            defs.add(def);
        }
        synthetic.produce(SyntheticBeanBuildItem.configure(DynamicConfigPropertyList.class)
                .runtimeValue(recorder.initializePropertiesInfo(defs))
                .unremovable()
                .done());
    }

    private static String stringOrNull(AnnotationValue v) {
        return v == null ? null : v.asString();
    }
}
